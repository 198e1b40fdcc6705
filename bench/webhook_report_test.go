//go:build bench

package bench

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// whReport is the outcome of TestWebhookDelivery.
type whReport struct {
	Env    *benchEnv
	Window time.Duration

	MatchTook, DrainTook time.Duration
	DrainCPU, SustainCPU whCPU
	DrainTx              int64
	Drain                *whReconcile

	Offered int
	Behind  time.Duration
	Latency []time.Duration // sorted, one per offered fact delivered
	Queued  []time.Duration // sorted: the part from the delivery's creation (matching) to the 2xx

	Ceiling      float64
	CeilingConns int64 // connections the ceiling run opened
	Kill         *whKill

	DrainVerdict, SustainVerdict, KillVerdict string
	Failures                                  []string
}

func (r *whReport) DrainRate() float64 { return float64(whBacklog) / r.DrainTook.Seconds() }

func (r *whReport) pct(p float64) time.Duration { return pctOf(r.Latency, p) }

// pctOf is the p-quantile of sorted durations (nearest rank).
func pctOf(d []time.Duration, p float64) time.Duration {
	n := len(d)
	if n == 0 {
		return 0
	}
	k := max(0, min(int(math.Ceil(p*float64(n)))-1, n-1))
	return d[k]
}

func (r *whReport) evaluate() {
	var drain, sustain, kill []string
	if rate := r.DrainRate(); rate < whTargetDrain {
		drain = append(drain, fmt.Sprintf("%s deliveries/s < %s", formatInt(int64(rate)), formatInt(whTargetDrain)))
	}
	if !r.Drain.ok(whBacklog) {
		drain = append(drain, fmt.Sprintf("reconciliation failed: %+v", *r.Drain))
	}
	if p99 := r.pct(0.99); p99 >= whTargetP99 || len(r.Latency) == 0 {
		sustain = append(sustain, fmt.Sprintf("p99 %s >= %s", fmtLatency(p99), fmtLatency(whTargetP99)))
	}
	if lost := r.Offered - len(r.Latency); lost != 0 {
		sustain = append(sustain, fmt.Sprintf("%d of %d offered facts not delivered within 2 minutes", lost, r.Offered))
	}
	if !r.Kill.Rec.ok(r.Kill.Backlog) {
		kill = append(kill, fmt.Sprintf("reconciliation failed: %+v", *r.Kill.Rec))
	}
	r.DrainVerdict, r.SustainVerdict, r.KillVerdict = verdict(drain), verdict(sustain), verdict(kill)
	for _, m := range drain {
		r.Failures = append(r.Failures, "(a) backlog drain: "+m)
	}
	for _, m := range sustain {
		r.Failures = append(r.Failures, "(b) sustained: "+m)
	}
	for _, m := range kill {
		r.Failures = append(r.Failures, "SIGKILL: "+m)
	}
}

func (r *whReport) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	e := r.Env
	w("## Webhook delivery (outbox to 64 HTTPS endpoints, Postgres)\n\n")
	w("Written by `TestWebhookDelivery` (`bash bench/run.sh -run TestWebhookDelivery`) on %s.\n\n", e.Date.Format("2006-01-02 15:04 UTC"))
	w("%s", e.machineRows())
	w("| PostgreSQL | %s, a local throwaway server (testutil.PostgresDurable) on 127.0.0.1: fsync=%s, synchronous_commit=%s |\n\n",
		e.PGVersion, e.Setting("fsync"), e.Setting("synchronous_commit"))
	w("Setup: one tenant with 64 webhook configs (retry backoff 1 s, at most 5 s: only the SIGKILL scenario retries), " +
		"each with its own trigger and its own receiver: 64 `httptest` TLS servers " +
		"on loopback ports (64 endpoints, HTTP/1.1 keep-alive) sharing one handler that reads the body, records the " +
		"`X-Svc-Delivery-Id` and answers 200. Bodies are about 1 KB. The webhook service runs in the test process " +
		"(`internal/host/webhook`, Workers 512, EndpointConcurrency 8, ClaimBatch 256), so every figure includes claiming, " +
		"payload signing (HMAC-SHA256), the HTTPS request, and recording each attempt's outcome with its `webhook.sent` " +
		"fact in the outbox row's transaction; the receivers share the same two cores.\n\n")
	w("| Scenario | Figure | Target | Result |\n|---|---|---|---|\n")
	w("| (a) drain a backlog of %s | **%s deliveries/s** (%s in %.1f s; %s received, %d duplicates, %d lost) | ≥ %s deliveries/s | %s |\n",
		formatInt(int64(whBacklog)), formatInt(int64(r.DrainRate())), formatInt(int64(whBacklog)), r.DrainTook.Seconds(),
		formatInt(int64(r.Drain.Received)), r.Drain.Duplicates, r.Drain.Lost, formatInt(whTargetDrain), r.DrainVerdict)
	w("| (b) %s facts/s offered for %v | commit to 2xx: p50 **%s**, p99 **%s**, max %s (%s facts, %s delivered) | p99 < %s | %s |\n",
		formatInt(whRate), r.Window, fmtLatency(r.pct(0.5)), fmtLatency(r.pct(0.99)), fmtLatency(r.pct(1)),
		formatInt(int64(r.Offered)), formatInt(int64(len(r.Latency))), fmtLatency(whTargetP99), r.SustainVerdict)
	w("| (b) of which: delivery created to 2xx | p50 %s, p99 %s (the rest is the stream consumer reading the fact and matching it) | | |\n",
		fmtLatency(pctOf(r.Queued, 0.5)), fmtLatency(pctOf(r.Queued, 0.99)))
	w("| (c) receiver ceiling | %s requests/s (%d clients, one per endpoint, 1 KB bodies, %v after a %v warm-up, one kept-alive connection each: %s opened in the window) | reference | — |\n",
		formatInt(int64(r.Ceiling)), min(whCeilingClients, whEndpoints), whCeilingWindow, whCeilingWarmup, formatInt(r.CeilingConns))
	k := r.Kill
	w("| SIGKILL of the worker process | %s deliveries: killed after %s had arrived, restarted; %s sent, %d lost, %d unknown, %d delivered twice (same id), %d interrupted attempts recorded; %.1f s in all | 0 lost, exact reconciliation | %s |\n\n",
		formatInt(int64(k.Backlog)), formatInt(k.AtKill), formatInt(int64(k.Rec.Deliveries-k.Rec.NotSent)), k.Rec.Lost, k.Rec.Unknown,
		k.Rec.Duplicates, k.Interrupts, k.Took.Seconds(), r.KillVerdict)
	if c := r.Ceiling; c > 0 {
		w("The drain reached %.0f%% of the receiver's own ceiling measured in the same run.\n\n", 100*r.DrainRate()/c)
	}
	w("Where the time went (CPU cores busy, averaged over the window):\n\n")
	w("| Window | test process (service + receivers) | PostgreSQL | other processes | whole machine |\n|---|---:|---:|---:|---:|\n")
	var noisy []string
	for _, row := range []struct {
		name string
		c    whCPU
	}{{"(a) drain", r.DrainCPU}, {"(b) sustained", r.SustainCPU}} {
		busy := 0.0
		if row.c.All > 0 {
			busy = float64(e.Cores) * float64(row.c.Busy) / float64(row.c.All)
		}
		self, pg := row.c.cores(row.c.Self), row.c.cores(row.c.PG)
		other := max(0, busy-self-pg)
		if other > 0.15 {
			noisy = append(noisy, fmt.Sprintf("%s (%.2f cores)", row.name, other))
		}
		w("| %s | %.2f | %.2f | %.2f | %.2f of %d |\n", row.name, self, pg, other, busy, e.Cores)
	}
	if len(noisy) > 0 {
		w("\n**Caution:** other processes used more than 0.15 cores during %s; the machine was not quiet and those "+
			"figures understate what it can do.\n", strings.Join(noisy, ", "))
	}
	if r.DrainTx > 0 {
		w("\n(a) committed %s transactions in all (claims and batches of recorded outcomes): %.0f deliveries per transaction.\n",
			formatInt(r.DrainTx), float64(whBacklog)/float64(r.DrainTx))
	}
	w("\nMatching the backlog's "+formatInt(int64(whBacklog))+" facts into deliveries (stream consumer: `webhook.triggered` "+
		"fact and outbox row per match) took %.1f s before (a) started. (b) starts once the stream consumer has read past "+
		"the audit facts (a) left; one generator appends, every 10 ms, every fact due by then (open loop: a slow commit "+
		"makes the next batch bigger, not the rate lower), and a fact's commit time is taken when `AppendFacts` returns; "+
		"the latency runs from there through the stream consumer, matching, the outbox, a claim and the HTTPS request to "+
		"the moment the receiver answers 200. A batch was at most %s behind its schedule. The SIGKILL scenario uses its "+
		"own database and a worker subprocess (this test binary, re-executed) with a 5 s lease; the kill lands while "+
		"attempts are in flight, and the restarted worker records each cut-short attempt as `ATTEMPT_INTERRUPTED` before "+
		"retrying it.\n\n", r.MatchTook.Seconds(), fmtLatency(r.Behind))
	w("Reproduce with `bash bench/run.sh -run TestWebhookDelivery` (`BENCH_DURATION` shortens (b) for a trial).\n")
	return b.String()
}
