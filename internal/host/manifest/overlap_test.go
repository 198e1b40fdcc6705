package manifest

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// pairwiseOverlap is the plain definition the index must agree with: the
// first earlier route of the same method and shape, else the first earlier
// one matching every path r matches.
func pairwiseOverlap(earlier []*Route, r *Route) (dup, shadow *Route) {
	for _, p := range earlier {
		if p.Method == r.Method && shape(p.Path) == shape(r.Path) {
			return p, nil
		}
	}
	for _, p := range earlier {
		if p.Method == r.Method && coversPath(p.Path, r.Path) {
			return nil, p
		}
	}
	return nil, nil
}

func coversPath(a, b string) bool {
	as := strings.Split(strings.Trim(a, "/"), "/")
	bs := strings.Split(strings.Trim(b, "/"), "/")
	if len(as) != len(bs) {
		return false
	}
	for i := range as {
		if !strings.HasPrefix(as[i], ":") && as[i] != bs[i] {
			return false
		}
	}
	return true
}

func TestRouteIndexAgreesWithPairwiseComparison(t *testing.T) {
	t.Parallel()
	segs := []string{"a", "b", ":x", ":y", ""}
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 300; round++ {
		index := newRouteIndex()
		var earlier []*Route
		for i := 0; i < 30; i++ {
			parts := make([]string, 1+rng.Intn(3))
			for j := range parts {
				parts[j] = segs[rng.Intn(len(segs))]
			}
			r := &Route{Method: []string{"GET", "POST"}[rng.Intn(2)], Path: "/" + strings.Join(parts, "/"), Line: i + 1}
			dup, shadow := index.add(r)
			wantDup, wantShadow := pairwiseOverlap(earlier, r)
			if dup != wantDup || shadow != wantShadow {
				t.Fatalf("round %d: %s after %d routes: got dup %v shadow %v, want dup %v shadow %v", round, r.ID(), len(earlier), dup, shadow, wantDup, wantShadow)
			}
			earlier = append(earlier, r)
		}
	}
}

// TestRouteOverlapWorkIsLinear checks a manifest of many routes under one
// prefix, the shape that made checking quadratic: the overlap search must
// look at a bounded number of nodes per route.
func TestRouteOverlapWorkIsLinear(t *testing.T) {
	t.Parallel()
	const n = 20_000
	index := newRouteIndex()
	for i := 0; i < n; i++ {
		for _, p := range []string{"/v1/accounts/:id/r%d", "/v1/accounts/r%d/:id", "/v1/r%d"} {
			if dup, shadow := index.add(&Route{Method: "GET", Path: fmt.Sprintf(p, i), Line: i + 1}); dup != nil || shadow != nil {
				t.Fatalf("route %d reported as overlapping", i)
			}
		}
	}
	if perRoute := float64(index.visits) / (3 * n); perRoute > 8 {
		t.Fatalf("overlap search visited %d nodes for %d routes (%.1f per route)", index.visits, 3*n, perRoute)
	}
}

// TestLargeGatewayManifestIsChecked checks a 20,000-route manifest end to
// end; BenchmarkParseGateway runs the 170,000-route (10 MB) one.
func TestLargeGatewayManifestIsChecked(t *testing.T) {
	t.Parallel()
	g, err := ParseGateway("big.yaml", bigGateway(20_000), repoDomain(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Routes) != 20_000 {
		t.Fatalf("%d routes, want 20000", len(g.Routes))
	}
}

// TestEmptySegmentsAreReportedOncePerPath: the problem quotes the whole
// path, so one per empty segment would grow with the square of the path.
func TestEmptySegmentsAreReportedOncePerPath(t *testing.T) {
	t.Parallel()
	path := "/v1" + strings.Repeat("/", 5000) + "x/:id"
	src := fmt.Sprintf("name: g\nversion: \"1\"\nroutes:\n  - {path: %q, method: GET, entity: account, action: get}\n", path)
	_, err := ParseGateway("g.yaml", []byte(src), repoDomain(t))
	n := 0
	for _, d := range Diagnostics("g.yaml", err) {
		if strings.Contains(d.Message, "has an empty segment") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d empty-segment problems, want 1", n)
	}
}
