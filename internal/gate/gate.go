// Package gate bounds how many large transfers (message bodies past their
// first MiB) are read and stored at once, in total and per client address,
// so that many senders of large mail cannot exhaust memory and one client
// cannot take every turn.
package gate

import (
	"context"
	"sync"
	"time"
)

// MinRate and Grace are the data rate a transfer holding a turn must keep:
// past Grace after it took the turn, it must have sent MinRate bytes a
// second on average, or it is cut off. A few slow (or hostile) clients would
// otherwise hold every turn while fast ones wait. A 25 MB message at the
// floor takes about 100 seconds; a sender on a network sends it in a
// fraction of that.
const (
	MinRate = 256 << 10
	Grace   = 5 * time.Second
)

// Deadline is when a transfer that took its turn at start and has sent n
// bytes since must have sent its next byte.
func Deadline(start time.Time, n int64) time.Time {
	return start.Add(Grace + time.Duration(n)*time.Second/MinRate)
}

// Gate hands out turns. It is safe for concurrent use.
type Gate struct {
	total, perKey int

	mu     sync.Mutex
	active int
	byKey  map[string]int
	// wake is closed and replaced whenever a turn is given back.
	wake    chan struct{}
	waiting int
}

// New returns a Gate with total turns, of which one key may hold at most
// perKey (at least 1; 0 or more than total means total).
func New(total, perKey int) *Gate {
	if total < 1 {
		total = 1
	}
	if perKey < 1 || perKey > total {
		perKey = total
	}
	return &Gate{total: total, perKey: perKey, byKey: map[string]int{}, wake: make(chan struct{})}
}

// Acquire waits for a turn for key until ctx is done, and returns the
// function that gives it back (calls after the first do nothing). It
// returns ctx's error when ctx ends first. A nil Gate gives every caller a
// turn at once.
func (g *Gate) Acquire(ctx context.Context, key string) (release func(), err error) {
	if g == nil {
		return func() {}, nil
	}
	counted := false
	for {
		g.mu.Lock()
		if g.active < g.total && g.byKey[key] < g.perKey {
			g.active++
			g.byKey[key]++
			if counted {
				g.waiting--
			}
			g.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { g.release(key) }) }, nil
		}
		if !counted {
			g.waiting++
			counted = true
		}
		wake := g.wake
		g.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			g.mu.Lock()
			g.waiting--
			g.mu.Unlock()
			return nil, ctx.Err()
		}
	}
}

func (g *Gate) release(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.active--
	if g.byKey[key]--; g.byKey[key] <= 0 {
		delete(g.byKey, key)
	}
	close(g.wake)
	g.wake = make(chan struct{})
}

// Counts returns the turns held and the callers waiting now.
func (g *Gate) Counts() (active, waiting int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.active, g.waiting
}
