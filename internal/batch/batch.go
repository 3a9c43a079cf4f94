// Package batch runs concurrent calls in batches: a call that arrives
// while a batch runs waits, and the next batch carries every call that
// arrived meanwhile. A lone call runs at once, and the size of a batch
// follows the load: the longer a batch takes, the more calls the next one
// carries. With Gather, a batch may first wait a little for the calls that
// recent batches suggest are coming; Keyed keeps a Batcher per key.
// internal/faults uses it to share reads of fault rules among concurrent
// SMTP transactions, store/redisstore to share Redis round trips among
// concurrent messages (and internal/migrate/boltv4, the earlier embedded
// store, to share one fsync among concurrent commits).
package batch

import (
	"sync"
	"time"
)

// Batcher runs batches of calls of type T with its run function, one batch
// at a time, in the goroutine of one of the batch's callers.
type Batcher[T any] struct {
	run func([]T)
	max int

	mu      sync.Mutex
	queue   []*call[T]
	leading bool // a caller is running batches
	closed  bool
	idle    sync.Cond // signalled when leading ends

	// gather is Gather's wait (0: none); recent holds the sizes of the
	// last batches, next the slot for the next one, and arrived gets a
	// token when a call queues behind a leader.
	gather  time.Duration
	recent  [recentBatches]int
	next    int
	arrived chan struct{}
}

// recentBatches is how many batch sizes Gather's estimate looks back over.
const recentBatches = 32

type call[T any] struct {
	v T
	// wake gets true when the caller is to run the next batch, false when
	// the batch holding its call has run.
	wake chan bool
}

// New returns a Batcher that runs batches of at most size calls with run.
// run reports each call's result through the call itself (T is usually a
// pointer). run must not panic: its callers would wait for ever.
func New[T any](size int, run func([]T)) *Batcher[T] {
	b := &Batcher[T]{run: run, max: max(size, 1)}
	b.idle.L = &b.mu
	return b
}

// Gather makes each batch wait, for at most d, until as many calls are
// queued as three quarters of the largest of the last 32 batches: where a
// batch has a fixed cost (an fsync), concurrent callers that come a moment
// apart then share it instead of paying for one batch each. Callers that
// never overlap make batches of one, and theirs do not wait. A wait that
// runs out forgets the sizes seen, its own batch's included, so after a
// burst (however long ago) one batch at most waits in vain. Close ends a
// wait at once. Call it before the first Do.
func (b *Batcher[T]) Gather(d time.Duration) {
	b.gather = d
	b.arrived = make(chan struct{}, 1)
}

// Do runs v in a batch and returns once that batch has run. It reports
// false, without running v, after Close.
func (b *Batcher[T]) Do(v T) bool {
	c := &call[T]{v: v, wake: make(chan bool, 1)}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return false
	}
	b.queue = append(b.queue, c)
	if b.leading {
		b.signal()
		b.mu.Unlock()
		if lead := <-c.wake; !lead {
			return true
		}
		// The caller before handed over: run the next batch, which holds
		// this call.
	} else {
		b.leading = true
		b.mu.Unlock()
	}
	b.lead()
	<-c.wake
	return true
}

// lead runs the queued calls as one batch, wakes their callers, and hands
// the lead to the first caller still queued, if any. Handing over, rather
// than running batches until the queue is empty, bounds the wait of the
// caller that leads to one batch of its own.
func (b *Batcher[T]) lead() {
	vain := !b.wait()
	b.mu.Lock()
	n := min(len(b.queue), b.max)
	calls := b.queue[:n:n]
	b.queue = b.queue[n:]
	if !vain {
		b.recent[b.next] = n
		b.next = (b.next + 1) % len(b.recent)
	}
	b.mu.Unlock()

	vs := make([]T, len(calls))
	for i, c := range calls {
		vs[i] = c.v
	}
	b.run(vs)
	for _, c := range calls {
		c.wake <- false
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) > 0 {
		b.queue[0].wake <- true
		return
	}
	b.queue = nil
	b.leading = false
	b.idle.Broadcast()
}

// wait is Gather's wait before a batch: until the queue holds the calls
// that recent batches suggest, or Close. It reports false when the wait ran
// out, having forgotten the sizes seen.
func (b *Batcher[T]) wait() bool {
	if b.gather <= 0 {
		return true
	}
	b.mu.Lock()
	largest := 0
	for _, n := range b.recent {
		largest = max(largest, n)
	}
	want := min((3*largest+2)/4, b.max)
	done := len(b.queue) >= want || b.closed
	b.mu.Unlock()
	if done {
		return true
	}
	timer := time.NewTimer(b.gather)
	defer timer.Stop()
	for !done {
		select {
		case <-b.arrived:
		case <-timer.C:
			b.mu.Lock()
			clear(b.recent[:])
			b.mu.Unlock()
			return false
		}
		b.mu.Lock()
		done = len(b.queue) >= want || b.closed
		b.mu.Unlock()
	}
	return true
}

// signal wakes a Gather wait to look at the queue again; b.mu is held.
func (b *Batcher[T]) signal() {
	if b.arrived == nil {
		return
	}
	select {
	case b.arrived <- struct{}{}:
	default: // a token is there already
	}
}

// Close makes later calls to Do report false and waits for the queued
// calls to run.
func (b *Batcher[T]) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.signal()
	for b.leading {
		b.idle.Wait()
	}
}
