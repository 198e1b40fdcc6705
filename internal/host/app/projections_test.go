package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/testutil"
)

// projectionRoutes adds a query route to the gateway manifest.
const projectionRoutes = `name: projections
version: "1"
routes:
  - {path: /v1/reports/calls, method: POST, entity: contact, action: query}
`

// hour0 is 2024-01-15T10:00:00Z.
const hour0 = int64(1705312800000)

// TestProjectionsEndToEnd drives projections over HTTP as a client would,
// on SQLite with in-process state and on Postgres with Redis: facts recorded
// before the projection exists are backfilled, later ones (a late one
// included) stream in, and the query route answers ranges, aggregates and
// group filters in materialized, compute and verify modes, scoped to the
// caller's tenant. A new version that aggregates differently backfills and
// takes over.
func TestProjectionsEndToEnd(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			loc := location(t, backend)
			l := startLive(t, backend, loc, func(c *app.Config) {
				dir := t.TempDir()
				man := filepath.Join(dir, "gateway.yaml")
				if err := os.WriteFile(man, []byte(projectionRoutes), 0o644); err != nil {
					t.Fatal(err)
				}
				c.Manifest = man
				if backend == "postgres" {
					c.RedisURL = testutil.Redis(t)
				}
			})
			other := l.newKey("t2", "live")
			for _, k := range []string{l.key, other} {
				if code, body := l.call("POST", "/v1/entities", k, map[string]any{"type": "contact", "id": "c1", "name": "Ada", "status": "active"}); code != 201 {
					t.Fatalf("create contact: %d %v", code, body)
				}
			}
			call := func(key string, id int, ts int64, channel string, duration any) {
				t.Helper()
				code, body := l.call("POST", "/v1/facts", key, map[string]any{"entity_id": "c1", "type": "call", "timestamp": ts,
					"data": map[string]any{"channel": channel, "duration": duration, "n": id}})
				if code != 201 {
					t.Fatalf("append call %d: %d %v", id, code, body)
				}
			}
			// Before the projection exists: backfilled.
			call(l.key, 1, hour0+5*60_000, "phone", 30)
			call(l.key, 2, hour0+20*60_000, "video", 60)
			call(other, 3, hour0+21*60_000, "phone", 1000) // another tenant
			if code, body := l.call("POST", "/v1/facts", l.key, map[string]any{"entity_id": "c1", "type": "note", "timestamp": hour0,
				"data": map[string]any{"channel": "phone", "duration": 999}}); code != 201 { // another fact type
				t.Fatalf("append note: %d %v", code, body)
			}

			settings := map[string]any{
				"source": "contact", "factTypes": []string{"call"}, "timeWindow": "hour", "groupBy": []string{"data.channel"},
				"aggregations": []map[string]any{
					{"field": "count", "function": "count"},
					{"field": "data.duration", "function": "sum"},
					{"field": "data.duration", "function": "avg"},
				},
				"materialize": true, "storageVersion": 2,
			}
			code, body := l.call("POST", "/v1/configs", l.key, map[string]any{"type": "projection", "name": "calls", "settings": settings})
			if code != 201 {
				t.Fatalf("create projection config: %d %v", code, body)
			}
			cfgID := dataOf(body)["id"].(string)

			// Asked at once, while it is still backfilling, it answers from
			// the facts, never with partial results.
			code, body = l.call("POST", "/v1/reports/calls", l.key, map[string]any{"projection": "calls"})
			if meta, _ := dataOf(body)["_meta"].(map[string]any); code != 200 || meta["ready"] == false && meta["mode"] != "compute" {
				t.Fatalf("query while backfilling: %d %v", code, body)
			}
			checkRows(t, body, []map[string]any{
				row("2024-01-15T10:phone", "2024-01-15T10", "phone", 1, "30", "30"),
				row("2024-01-15T10:video", "2024-01-15T10", "video", 1, "60", "60"),
			})

			// After: streamed in, one of them late (an hour earlier).
			call(l.key, 4, hour0+65*60_000, "phone", 10.5)
			call(l.key, 5, hour0+30*60_000, "phone", 20)
			call(l.key, 6, hour0-50*60_000, "phone", 5)

			want := []map[string]any{
				row("2024-01-15T09:phone", "2024-01-15T09", "phone", 1, "5", "5"),
				row("2024-01-15T10:phone", "2024-01-15T10", "phone", 2, "50", "25"),
				row("2024-01-15T10:video", "2024-01-15T10", "video", 1, "60", "60"),
				row("2024-01-15T11:phone", "2024-01-15T11", "phone", 1, "10.5", "10.5"),
			}
			query := func(key string, filters map[string]any) (int, map[string]any) {
				t.Helper()
				return l.call("POST", "/v1/reports/calls", key, map[string]any{"projection": "calls", "filters": filters})
			}
			waitRows(t, func() (int, map[string]any) { return query(l.key, nil) }, want)

			tests := []struct {
				name    string
				filters map[string]any
				want    []map[string]any
			}{
				{"range in ms", map[string]any{"from": hour0, "to": hour0 + 3_600_000 - 1}, want[1:3]},
				{"range as bucket keys", map[string]any{"from": "2024-01-15T10", "to": "2024-01-15T11"}, want[1:]},
				{"range as RFC 3339", map[string]any{"to": "2024-01-15T10:00:00Z"}, want[:3]},
				{"group filter", map[string]any{"data.channel": "video"}, want[2:3]},
				{"groups object", map[string]any{"groups": map[string]any{"data.channel": "phone"}, "from": hour0},
					[]map[string]any{want[1], want[3]}},
				{"aggregate", map[string]any{"aggregate": true},
					[]map[string]any{{"key": "aggregated", "count": json.Number("5"), "duration_sum": json.Number("125.5"), "duration_avg": json.Number("25.1")}}},
				{"aggregate over a range", map[string]any{"aggregate": true, "from": hour0, "to": hour0},
					[]map[string]any{{"key": "aggregated", "count": json.Number("3"), "duration_sum": json.Number("110"), "duration_avg": json.Number("36.6666666666666667")}}},
			}
			for _, tt := range tests {
				for _, mode := range []string{"materialized", "compute", "verify"} {
					t.Run(tt.name+"/"+mode, func(t *testing.T) {
						f := map[string]any{"mode": mode}
						for k, v := range tt.filters {
							f[k] = v
						}
						code, body := query(l.key, f)
						if code != 200 {
							t.Fatalf("query: %d %v", code, body)
						}
						checkRows(t, body, tt.want)
						meta := dataOf(body)["_meta"].(map[string]any)
						if meta["config_id"] != cfgID || fmt.Sprint(meta["config_version"]) != "1" || meta["mode"] != mode {
							t.Errorf("_meta: %v", meta)
						}
						if mode == "verify" && meta["consistent"] != true {
							t.Errorf("verify: not consistent: %v", meta)
						}
					})
				}
			}

			// By id too, and through the platform endpoint.
			code, body = l.call("POST", "/v1/projections/"+cfgID+"/query", l.key, map[string]any{"filters": map[string]any{"data.channel": "video"}})
			if code != 200 {
				t.Fatalf("platform query: %d %v", code, body)
			}
			checkRows(t, body, want[2:3])
			// Its filters go in the body: a query string would be ignored.
			code, body = l.call("POST", "/v1/projections/"+cfgID+"/query?from=abc", l.key, map[string]any{})
			if code != 400 || !strings.Contains(fmt.Sprint(body["errors"]), "unknown query parameter from") {
				t.Fatalf("platform query with a query string: %d %v", code, body)
			}

			// Both endpoints are in the API description.
			resp, err := http.Get(l.base + "/openapi.json")
			if err != nil {
				t.Fatal(err)
			}
			doc, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, p := range []string{`"/v1/projections"`, `"/v1/projections/{id}/query"`} {
				if !strings.Contains(string(doc), p) {
					t.Errorf("/openapi.json lacks %s", p)
				}
			}

			// Tenant scope: the other tenant has no projection of that name
			// or id, and its facts never reached this one's results.
			for _, name := range []string{"calls", cfgID} {
				code, body = l.call("POST", "/v1/reports/calls", other, map[string]any{"projection": name})
				if code != 404 || body["detail"] != "Projection "+name+" not found" {
					t.Errorf("other tenant's query of %s: %d %v", name, code, body)
				}
			}

			// Bad filters: every problem, with the field.
			code, body = query(l.key, map[string]any{"mode": "fast", "from": "yesterday", "nope": 1, "aggregate": "yes"})
			if code != 400 || !strings.HasSuffix(fmt.Sprint(body["type"]), "/errors/validation-failed") {
				t.Fatalf("bad filters: %d %v", code, body)
			}
			if got := fieldsOf(body); !reflect.DeepEqual(got, []string{"filters.aggregate", "filters.from", "filters.mode", "filters.nope"}) {
				t.Errorf("bad filters: fields %v", got)
			}
			code, body = query(l.key, map[string]any{"from": hour0 + 1, "to": hour0})
			if code != 400 || !reflect.DeepEqual(fieldsOf(body), []string{"filters.from"}) {
				t.Errorf("from after to: %d %v", code, body)
			}

			// Invalid settings: every issue as a field error; a second
			// projection may not take the name.
			bad := map[string]any{"source": "nothing", "factTypes": []string{}, "timeWindow": "week",
				"aggregations": []map[string]any{{"field": "x", "function": "median"}}, "materialize": true, "storageVersion": 3}
			// An unknown key in the body is reported beside them, on create
			// and on update.
			for _, req := range []struct{ method, path string }{{"POST", "/v1/configs"}, {"PUT", "/v1/configs/" + cfgID}} {
				code, body = l.call(req.method, req.path, l.key, map[string]any{"type": "projection", "name": "calls", "settings": bad, "colour": "red"})
				if code != 400 {
					t.Fatalf("invalid projection config: %d %v", code, body)
				}
				fields := strings.Join(fieldsOf(body), " ")
				want := []string{"colour", "settings.source", "settings.factTypes", "settings.timeWindow", "settings.aggregations[0].function", "settings.storageVersion"}
				if req.method == "POST" {
					want = append(want, "name")
				} else {
					want = append(want, "type") // not a field of an update
				}
				for _, f := range want {
					if !strings.Contains(fields, f) {
						t.Errorf("%s invalid projection config: no error for %s in %v", req.method, f, body["errors"])
					}
				}
			}

			// A fact type the source does not declare would count nothing.
			undeclared := map[string]any{"source": "contact", "factTypes": []string{"call", "won"}, "timeWindow": "hour", "materialize": true, "storageVersion": 2,
				"aggregations": []map[string]any{{"field": "count", "function": "count"}}}
			code, body = l.call("POST", "/v1/configs", l.key, map[string]any{"type": "projection", "name": "wins", "settings": undeclared})
			if code != 400 || !reflect.DeepEqual(fieldsOf(body), []string{"settings.factTypes[1]"}) ||
				!strings.Contains(fmt.Sprint(body["errors"]), `entity type contact declares no fact type "won"`) {
				t.Errorf("a fact type the source does not declare: %d %v", code, body)
			}

			// A new version that aggregates differently backfills under new
			// state and then answers with its own version.
			settings["groupBy"] = []string{}
			settings["aggregations"] = []map[string]any{{"field": "data.duration", "function": "max"}}
			code, body = l.call("PUT", "/v1/configs/"+cfgID, l.key, map[string]any{"settings": settings})
			if code != 200 {
				t.Fatalf("new projection version: %d %v", code, body)
			}
			testutil.EventuallyNil(t, 30*time.Second, func() error {
				code, body = query(l.key, nil)
				meta, _ := dataOf(body)["_meta"].(map[string]any)
				if code == 200 && fmt.Sprint(meta["config_version"]) == "2" && meta["ready"] == true {
					return nil
				}
				return fmt.Errorf("version 2 has not taken over: %d %v", code, body)
			})
			checkRows(t, body, []map[string]any{
				{"key": "2024-01-15T09", "bucket": "2024-01-15T09", "window": "hour", "duration_max": json.Number("5")},
				{"key": "2024-01-15T10", "bucket": "2024-01-15T10", "window": "hour", "duration_max": json.Number("60")},
				{"key": "2024-01-15T11", "bucket": "2024-01-15T11", "window": "hour", "duration_max": json.Number("10.5")},
			})

			// Archived: gone.
			if code, body = l.call("DELETE", "/v1/configs/"+cfgID, l.key, nil); code != 200 {
				t.Fatalf("archive: %d %v", code, body)
			}
			testutil.EventuallyNil(t, 30*time.Second, func() error {
				if code, _ = query(l.key, nil); code != 404 {
					return fmt.Errorf("archived projection still answers: %d", code)
				}
				return nil
			})
		})
	}
}

func row(key, bucket, channel string, count int, sum, avg string) map[string]any {
	return map[string]any{"key": key, "bucket": bucket, "window": "hour", "group": map[string]any{"data.channel": channel},
		"count": json.Number(fmt.Sprint(count)), "duration_sum": json.Number(sum), "duration_avg": json.Number(avg)}
}

// waitRows polls a query until its rows are want and the projection has
// caught up with the stream, and fails with the last answer after a while.
func waitRows(t *testing.T, q func() (int, map[string]any), want []map[string]any) {
	t.Helper()
	testutil.EventuallyNil(t, 30*time.Second, func() error {
		code, body := q()
		meta, _ := dataOf(body)["_meta"].(map[string]any)
		if code == 200 && rowsEqual(body, want) && meta["ready"] == true {
			return nil
		}
		return fmt.Errorf("query did not return the expected rows: %d %v\nwant %v", code, body, want)
	})
}

func rowsEqual(body map[string]any, want []map[string]any) bool {
	d := dataOf(body)
	got, _ := d["results"].([]any)
	if len(got) != len(want) || fmt.Sprint(d["count"]) != fmt.Sprint(len(want)) {
		return false
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			return false
		}
	}
	return true
}

func checkRows(t *testing.T, body map[string]any, want []map[string]any) {
	t.Helper()
	if !rowsEqual(body, want) {
		t.Errorf("rows:\ngot  %v\nwant %v", dataOf(body)["results"], want)
	}
}

func fieldsOf(body map[string]any) []string {
	var out []string
	errs, _ := body["errors"].([]any)
	for _, e := range errs {
		m, _ := e.(map[string]any)
		out = append(out, fmt.Sprint(m["field"]))
	}
	return out
}

// TestProjectionQueryWithTheDatabaseDown: a query that reads the facts
// (compute mode) while Postgres is unreachable answers the database's
// 503, as every other read does; it answered "Projection state is
// unavailable; retry, or query with filters.mode compute", the mode it
// was already in, blaming the cached state, which was up.
func TestProjectionQueryWithTheDatabaseDown(t *testing.T) {
	t.Parallel()
	proxied, px := testutil.ProxyPostgres(t, testutil.Postgres(t))
	l := startLive(t, "postgres", proxied, func(c *app.Config) { c.RedisURL = testutil.Redis(t) })
	code, body := l.call("POST", "/v1/configs", l.key, map[string]any{"type": "projection", "name": "calls", "settings": map[string]any{
		"source": "contact", "factTypes": []string{"call"}, "timeWindow": "hour",
		"aggregations": []map[string]any{{"field": "count", "function": "count"}}, "materialize": true, "storageVersion": 2}})
	if code != 201 {
		t.Fatalf("create the projection: %d %v", code, body)
	}
	id := fmt.Sprint(dataOf(body)["id"])
	if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "contact", "id": "c1", "name": "Ada", "status": "active"}); code != 201 {
		t.Fatalf("create contact: %d %v", code, body)
	}
	if code, body := l.call("POST", "/v1/facts", l.key, map[string]any{"entity_id": "c1", "type": "call", "timestamp": hour0, "data": map[string]any{}}); code != 201 {
		t.Fatalf("append: %d %v", code, body)
	}
	query := func(mode string) (int, http.Header, map[string]any) {
		return l.callHeader("POST", "/v1/projections/"+id+"/query", l.key, map[string]any{"filters": map[string]any{"mode": mode, "aggregate": true}})
	}
	testutil.EventuallyNil(t, 30*time.Second, func() error {
		if code, _, body := query("compute"); code != 200 {
			return fmt.Errorf("query before the outage: %d %v", code, body)
		}
		return nil
	})

	px.SetDown(true)
	code, hdr, body := query("compute")
	if code != 503 || hdr.Get("Retry-After") != "5" || body["detail"] != "The database is not answering; retry in a few seconds" {
		t.Fatalf("compute query with the database down: %d Retry-After %q %v", code, hdr.Get("Retry-After"), body)
	}
	px.SetDown(false)
}
