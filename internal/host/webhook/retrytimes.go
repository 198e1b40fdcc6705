package webhook

import (
	"container/heap"
	"sync"
)

// maxRetryTimes bounds the retry times a deliverer remembers. Past it a
// noted time other than the earliest is forgotten to make room: the
// dispatcher's poll (PollInterval) still finds that row, only later.
const maxRetryTimes = 4096

// retryTimes holds the times (ms) of the retries this process scheduled
// and has not claimed at yet, earliest first. It keeps every one, not only
// the earliest: a claim at the earliest does not pick up a retry due after
// it, and the dispatcher must wake again for that one.
type retryTimes struct {
	mu    sync.Mutex
	times int64Heap
}

// add notes a retry at time at and reports whether it is now the
// earliest (the dispatcher then plans its wake-up again).
func (r *retryTimes) add(at int64) (earliest bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.times) > 0 && r.times[0] == at {
		return false
	}
	if len(r.times) >= maxRetryTimes {
		// The last element is a leaf, never the earliest: removing it
		// keeps the heap ordered.
		r.times = r.times[:len(r.times)-1]
	}
	heap.Push(&r.times, at)
	return r.times[0] == at
}

// claimedAt drops the times a claim made at now covers.
func (r *retryTimes) claimedAt(now int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.times) > 0 && r.times[0] <= now {
		heap.Pop(&r.times)
	}
}

// next returns the earliest time still to claim at, 0 when there is none.
func (r *retryTimes) next() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.times) == 0 {
		return 0
	}
	return r.times[0]
}

// int64Heap is a min-heap of int64 for container/heap.
type int64Heap []int64

func (h int64Heap) Len() int           { return len(h) }
func (h int64Heap) Less(i, j int) bool { return h[i] < h[j] }
func (h int64Heap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *int64Heap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *int64Heap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
