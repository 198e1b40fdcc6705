//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/id"
	"github.com/factline/factline/internal/host/store"
)

// Fan-out benchmark parameters (issue 15, scenario 4).
const (
	fanEndpoints   = 200
	fanRate        = 50 // facts/s, each matched by every config
	fanTrigger     = "bench.fan"
	fanTargetP99   = time.Second
	fanStarveRatio = 2.0 // an endpoint's p99 at most this times the median endpoint's
)

// fanFacts returns n facts of the one subtype every config matches.
func fanFacts(n, offset int) []store.Append {
	items := make([]store.Append, n)
	now := time.Now().UnixMilli()
	for i := range items {
		items[i] = store.Append{Fact: store.Fact{ID: id.New(id.Fact), TenantID: whTenant, Type: "bench", Subtype: "fan",
			Timestamp: now, CreatedAt: now, Data: json.RawMessage(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, offset+i, whPadding))}}
	}
	return items
}

// fanReport is the outcome of TestWebhookFanOut.
type fanReport struct {
	Env    *benchEnv
	Window time.Duration

	Offered     int // facts
	Behind      time.Duration
	Took        time.Duration // first commit to last 2xx
	CPU         whCPU
	Latency     []time.Duration // sorted, every (endpoint, fact) delivered
	Matched     []time.Duration // sorted, one per fact: commit to its deliveries' creation (the matcher's lag)
	EndpointP99 []time.Duration // sorted, one per endpoint
	Short       int             // endpoints missing deliveries
	Conns       int64           // connections the service opened to the receivers
	Ceiling     float64
	// CeilingConns is the connections the ceiling run opened.
	CeilingConns int64

	Verdicts map[string]string
	Failures []string
}

func (r *fanReport) delivered() int { return len(r.Latency) }
func (r *fanReport) rate() float64 {
	if r.Took <= 0 {
		return 0
	}
	return float64(r.delivered()) / r.Took.Seconds()
}
func (r *fanReport) medianEP() time.Duration { return pctOf(r.EndpointP99, 0.5) }
func (r *fanReport) worstEP() time.Duration  { return pctOf(r.EndpointP99, 1) }

func (r *fanReport) evaluate() {
	r.Verdicts = map[string]string{}
	var lat, starve []string
	if p99 := pctOf(r.Latency, 0.99); p99 >= fanTargetP99 || len(r.Latency) == 0 {
		lat = append(lat, fmt.Sprintf("p99 %s >= %s", fmtLatency(p99), fmtLatency(fanTargetP99)))
	}
	if want := r.Offered * fanEndpoints; r.delivered() != want {
		lat = append(lat, fmt.Sprintf("%d of %d deliveries not received within 2 minutes", want-r.delivered(), want))
	}
	if m := r.medianEP(); m <= 0 || float64(r.worstEP()) > fanStarveRatio*float64(m) {
		starve = append(starve, fmt.Sprintf("worst endpoint p99 %s > %.0fx the median endpoint's %s", fmtLatency(r.worstEP()), fanStarveRatio, fmtLatency(m)))
	}
	if r.Short > 0 {
		starve = append(starve, fmt.Sprintf("%d endpoints missed deliveries", r.Short))
	}
	r.Verdicts["latency"], r.Verdicts["starve"] = verdict(lat), verdict(starve)
	for _, m := range lat {
		r.Failures = append(r.Failures, "fan-out latency: "+m)
	}
	for _, m := range starve {
		r.Failures = append(r.Failures, "fan-out starvation: "+m)
	}
}

func (r *fanReport) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	e := r.Env
	w("## Webhook fan-out (one fact type, 200 configs, 200 HTTPS endpoints, Postgres)\n\n")
	w("Written by `TestWebhookFanOut` (`bash bench/run.sh -run TestWebhookFanOut`) on %s.\n\n", e.Date.Format("2006-01-02 15:04 UTC"))
	w("%s", e.machineRows())
	w("| PostgreSQL | %s, a local throwaway server (testutil.PostgresDurable) on 127.0.0.1: fsync=%s, synchronous_commit=%s |\n\n",
		e.PGVersion, e.Setting("fsync"), e.Setting("synchronous_commit"))
	if r.Window < 60*time.Second {
		w("**Shortened window:** facts were offered for %v, not the scenario's 60 s (`BENCH_DURATION`), because the "+
			"machine was shared with other work during the run; the figures below are from that window.\n\n", r.Window)
	}
	w("Setup: one tenant with %d webhook configs, every one triggered by `%s`, each with its own receiver: %d `httptest` "+
		"TLS servers on loopback ports (HTTP/1.1 keep-alive) sharing the handler of the webhook delivery benchmark, which "+
		"records each endpoint's first 2xx per fact. One generator appends %d facts/s (about 1 KB bodies) for %v, so every "+
		"fact becomes %d deliveries: %s deliveries/s offered. The webhook service runs in the test process (Workers 512, "+
		"EndpointConcurrency 8, ClaimBatch 256): matching (a `webhook.triggered` fact and an outbox row per match), "+
		"claiming, HMAC signing, the HTTPS request and each attempt's `webhook.sent` fact are all included, and the "+
		"receivers share the same cores. Latency runs from the fact's commit (`AppendFacts` returned) to the receiver's 200.\n\n",
		fanEndpoints, fanTrigger, fanEndpoints, fanRate, r.Window, fanEndpoints, formatInt(fanRate*fanEndpoints))
	w("| Figure | Value | Target | Result |\n|---|---|---|---|\n")
	w("| deliveries/s | **%s** (%s of %s deliveries in %.1f s, start of the offer to the last 2xx) | %s offered | — |\n",
		formatInt(int64(r.rate())), formatInt(int64(r.delivered())), formatInt(int64(r.Offered*fanEndpoints)), r.Took.Seconds(),
		formatInt(fanRate*fanEndpoints))
	w("| commit to 2xx, all deliveries | p50 **%s**, p99 **%s**, max %s | p99 < %s, all delivered | %s |\n",
		fmtLatency(pctOf(r.Latency, 0.5)), fmtLatency(pctOf(r.Latency, 0.99)), fmtLatency(pctOf(r.Latency, 1)),
		fmtLatency(fanTargetP99), r.Verdicts["latency"])
	w("| of which: commit to matched | p50 %s, p99 %s (the stream consumer reading the fact and creating its deliveries; ms resolution) | | |\n",
		fmtLatency(pctOf(r.Matched, 0.5)), fmtLatency(pctOf(r.Matched, 0.99)))
	w("| per-endpoint p99 | median endpoint %s, best %s, worst **%s** (%.2fx the median); %d endpoints short | worst ≤ %.0fx median, none short | %s |\n",
		fmtLatency(r.medianEP()), fmtLatency(pctOf(r.EndpointP99, 0)), fmtLatency(r.worstEP()),
		float64(r.worstEP())/max(1, float64(r.medianEP())), r.Short, fanStarveRatio, r.Verdicts["starve"])
	w("| connections the service opened | %s (%d endpoints; each new connection is a TLS handshake) | | — |\n",
		formatInt(r.Conns), fanEndpoints)
	w("| receivers' own ceiling | %s requests/s (128 clients, 1 KB bodies, %v after a %v warm-up, each client over its own 1 or 2 of the %d endpoints on one kept-alive connection each; %s connections opened in the window) | reference | — |\n",
		formatInt(int64(r.Ceiling)), whCeilingWindow, whCeilingWarmup, fanEndpoints, formatInt(r.CeilingConns))
	if r.Ceiling > 0 {
		w("| share of the ceiling | **%.0f%%** | | |\n", 100*r.rate()/r.Ceiling)
	}
	busy := 0.0
	if r.CPU.All > 0 {
		busy = float64(e.Cores) * float64(r.CPU.Busy) / float64(r.CPU.All)
	}
	self, pg := r.CPU.cores(r.CPU.Self), r.CPU.cores(r.CPU.PG)
	w("\nThe ceiling is what the %d receivers serve in this process when nothing else runs: HTTPS requests over "+
		"kept-alive connections, one per endpoint and client, as a sender keeps its connections to each receiver (resuming "+
		"TLS sessions as the webhook client does), opened by the warm-up, so the window pays no handshakes. The service's "+
		"deliveries share the cores with the receivers, the matcher and PostgreSQL, so 100%% is out of reach by construction.\n",
		fanEndpoints)
	w("\nThe webhook contract records every delivery as facts: a `webhook.triggered` fact when a fact matches a config and "+
		"a `webhook.sent` fact per attempt. The offer is therefore also at least %s fact appends/s (each with its outbox "+
		"row written and then updated), on the same cores as the receivers.\n", formatInt(2*fanRate*fanEndpoints))
	w("\nCPU cores busy during the offer window: test process (service + receivers) %.2f, PostgreSQL %.2f, other processes %.2f, "+
		"whole machine %.2f of %d. A batch of facts was at most %s behind its schedule.\n",
		self, pg, max(0, busy-self-pg), busy, e.Cores, fmtLatency(r.Behind))
	if other := busy - self - pg; other > 0.15 {
		w("\n**Caution:** other processes used %.2f cores during the window; the machine was not quiet and these "+
			"figures understate what it can do.\n", other)
	}
	w("\nReproduce with `bash bench/run.sh -run TestWebhookFanOut` (`BENCH_DURATION` sets the offer window, 60 s by default).\n")
	return b.String()
}

// TestWebhookFanOut measures one fact type matched by 200 webhook configs
// (200 loopback HTTPS endpoints): 50 facts/s for 60 s (10,000
// deliveries/s offered), commit to 2xx overall and per endpoint, next to
// the receivers' own ceiling in the same run.
func TestWebhookFanOut(t *testing.T) {
	ctx := context.Background()
	window := benchWindow(t, 60*time.Second)
	rc := startWhReceiverN(t, fanEndpoints, true)
	db := newWhDBTriggers(t, ctx, rc, func(int) string { return fanTrigger })
	env, err := collectEnv(ctx, db.url, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rep := &fanReport{Env: env, Window: window}
	mon := newMonitor(ctx, db.pool)

	svc := db.service(t, rc, false, false)
	db.waitConsumer(t, ctx)
	base, conns0 := rc.total.Load(), rc.conns.Load()
	cpu0 := whSampleCPU(mon.postmaster)
	stopProfile := startBenchProfile(t)
	start := time.Now()
	rep.Offered, rep.Behind = whOffer(t, ctx, db, rc, window, fanRate, fanFacts)
	stopProfile()
	rep.CPU = whSampleCPU(mon.postmaster).sub(cpu0)
	want := int64(rep.Offered * fanEndpoints)
	deadline := time.Now().Add(2 * time.Minute)
	for rc.total.Load()-base < want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // poll interval; the deadline is above
	}
	stopService(t, svc)
	rep.Conns = rc.conns.Load() - conns0

	rc.mu.Lock()
	var last time.Time
	for _, got := range rc.byEndpoint {
		var lat []time.Duration
		for fact, at := range got {
			c, ok := rc.commits.Load(fact)
			if !ok {
				continue
			}
			lat = append(lat, at.Sub(c.(time.Time)))
			if at.After(last) {
				last = at
			}
		}
		if len(lat) < rep.Offered {
			rep.Short++
		}
		slices.Sort(lat)
		rep.EndpointP99 = append(rep.EndpointP99, pctOf(lat, 0.99))
		rep.Latency = append(rep.Latency, lat...)
	}
	for fact, got := range rc.received {
		if c, ok := rc.commits.Load(fact); ok && !got.created.IsZero() {
			rep.Matched = append(rep.Matched, max(0, got.created.Sub(c.(time.Time))))
		}
	}
	rc.mu.Unlock()
	slices.Sort(rep.Matched)
	slices.Sort(rep.Latency)
	slices.Sort(rep.EndpointP99)
	if !last.IsZero() {
		rep.Took = last.Sub(start)
	}
	t.Logf("fan-out: %d facts, %d deliveries in %v: %.0f/s; p50 %v p99 %v (matched p50 %v p99 %v); endpoint p99 median %v worst %v; %d connections",
		rep.Offered, rep.delivered(), rep.Took, rep.rate(), pctOf(rep.Latency, 0.5), pctOf(rep.Latency, 0.99),
		pctOf(rep.Matched, 0.5), pctOf(rep.Matched, 0.99), rep.medianEP(), rep.worstEP(), rep.Conns)

	rep.Ceiling, rep.CeilingConns = whCeiling(t, rc)
	rc.reset()

	rep.evaluate()
	md := rep.markdown()
	fmt.Println(md)
	if os.Getenv("BENCH_WEBHOOK_NO_WRITE") == "" {
		if err := updateSection("RESULTS.md", "webhook-fanout", md); err != nil {
			t.Errorf("update RESULTS.md: %v", err)
		}
	}
	for _, f := range rep.Failures {
		t.Errorf("missed: %s", f)
	}
}
