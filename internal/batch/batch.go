// Package batch runs concurrent calls in batches without a timer: a call
// that arrives while a batch runs waits, and the next batch carries every
// call that arrived meanwhile. A lone call runs at once, and the size of a
// batch follows the load: the longer a batch takes, the more calls the next
// one carries. boltstore uses it to share one fsync among concurrent
// commits.
package batch

import "sync"

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
}

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
	b.mu.Lock()
	n := min(len(b.queue), b.max)
	calls := b.queue[:n:n]
	b.queue = b.queue[n:]
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

// Close makes later calls to Do report false and waits for the queued
// calls to run.
func (b *Batcher[T]) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for b.leading {
		b.idle.Wait()
	}
}
