package pluginrt

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Stats are a plugin version's call figures since it was loaded.
type Stats struct {
	Calls    uint64 `json:"calls"`    // every call, whatever its outcome
	Errors   uint64 `json:"errors"`   // error replies (statuses 1-5)
	Traps    uint64 `json:"traps"`    // traps and ABI violations
	Timeouts uint64 `json:"timeouts"` // calls stopped at their (or their caller's) deadline
	Canceled uint64 `json:"canceled"` // calls canceled by their caller, or whose caller's context ended while waiting for an instance
	// Latency of calls, waiting for an instance included. P50 and P99 come
	// from a histogram with 4 buckets per power of two (within 12%).
	Mean time.Duration `json:"mean_ns"`
	P50  time.Duration `json:"p50_ns"`
	P99  time.Duration `json:"p99_ns"`
	// Instances is the pool size; Idle how many instances are ready now;
	// Replacements how many instances were made, in the background, to
	// replace discarded ones since the load.
	Instances    int    `json:"instances"`
	Idle         int    `json:"idle"`
	Replacements uint64 `json:"replacements"`
}

// Outcome of one call.
type Outcome uint8

// The outcomes.
const (
	OutcomeOK       Outcome = iota
	OutcomeError            // an error reply (statuses 1-5)
	OutcomeTrap             // a trap or an ABI violation
	OutcomeTimeout          // stopped at its (or its caller's) deadline
	OutcomeCanceled         // canceled by its caller, waiting for an instance included
)

// Short names inside the package.
type outcome = Outcome

const (
	outcomeOK       = OutcomeOK
	outcomeError    = OutcomeError
	outcomeTrap     = OutcomeTrap
	outcomeTimeout  = OutcomeTimeout
	outcomeCanceled = OutcomeCanceled
)

// numBuckets covers every uint64 nanosecond value: 8 exact buckets, then 4
// per power of two.
const numBuckets = 8 + 61*4

// stats counts calls without locks.
type stats struct {
	calls, errors, traps, timeouts, canceled atomic.Uint64
	replacements                             atomic.Uint64
	sumNanos                                 atomic.Uint64
	buckets                                  [numBuckets]atomic.Uint64
}

func (s *stats) record(o outcome, d time.Duration) {
	s.calls.Add(1)
	switch o {
	case outcomeError:
		s.errors.Add(1)
	case outcomeTrap:
		s.traps.Add(1)
	case outcomeTimeout:
		s.timeouts.Add(1)
	case outcomeCanceled:
		s.canceled.Add(1)
	}
	n := uint64(max(d, 0))
	s.sumNanos.Add(n)
	s.buckets[bucketOf(n)].Add(1)
}

func bucketOf(v uint64) int {
	if v < 8 {
		return int(v)
	}
	e := bits.Len64(v) // >= 4
	m := (v >> (e - 3)) & 3
	return 8 + (e-4)*4 + int(m)
}

// bucketValue is the middle of bucket i.
func bucketValue(i int) uint64 {
	if i < 8 {
		return uint64(i)
	}
	e := (i-8)/4 + 4
	m := uint64((i - 8) % 4)
	width := uint64(1) << (e - 3)
	return (4+m)*width + width/2
}

func (s *stats) snapshot() Stats {
	st := Stats{
		Calls: s.calls.Load(), Errors: s.errors.Load(), Traps: s.traps.Load(),
		Timeouts: s.timeouts.Load(), Canceled: s.canceled.Load(), Replacements: s.replacements.Load(),
	}
	var counts [numBuckets]uint64
	var total uint64
	for i := range counts {
		counts[i] = s.buckets[i].Load()
		total += counts[i]
	}
	if total == 0 {
		return st
	}
	st.Mean = time.Duration(s.sumNanos.Load() / total)
	st.P50 = time.Duration(quantile(&counts, total, 0.50))
	st.P99 = time.Duration(quantile(&counts, total, 0.99))
	return st
}

func quantile(counts *[numBuckets]uint64, total uint64, q float64) uint64 {
	rank := uint64(q*float64(total) + 0.5)
	rank = max(rank, 1)
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen >= rank {
			return bucketValue(i)
		}
	}
	return bucketValue(numBuckets - 1)
}
