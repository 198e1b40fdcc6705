#!/usr/bin/env bash
# Runs the benchmarks under bench/ (build tag "bench") and updates
# bench/RESULTS.md. Exits non-zero when a benchmark misses a target or
# finds a broken invariant.
#
# One package, no -race, no parallel packages: the figures are meant to
# describe the product, not the race detector or a contended machine.
# Extra arguments go to `go test` (for example -run TestFactAppends).
# BENCH_DURATION / BENCH_WARMUP shorten the windows for a trial run;
# BENCH_CPUPROFILE=FILE writes a CPU profile of the test process: the HTTP
# (a) window of the append benchmark, the drain (a) of TestWebhookDelivery,
# the offer window of TestWebhookFanOut.
set -euo pipefail

cd "$(dirname "$0")/.."
GO=${GO:-go}

set +e
"$GO" test -tags bench -run . -count=1 -v -timeout 60m "$@" ./bench/
status=$?
set -e

if [ "$status" -ne 0 ]; then
  echo "bench: FAILED (exit $status); see the output above and bench/RESULTS.md" >&2
  exit "$status"
fi
echo "bench: ok; figures in bench/RESULTS.md"
