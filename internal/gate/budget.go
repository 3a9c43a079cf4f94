package gate

import (
	"context"
	"sync"
)

// Budget shares out bytes of memory among callers: at most total at once
// in all, and at most perKey to any one key (a client address, an account),
// so that one client or one account cannot take it all. It bounds what
// request bodies hold in memory while they are read and used, whatever the
// number of requests. It is safe for concurrent use.
type Budget struct {
	total, perKey int64

	mu    sync.Mutex
	used  int64
	byKey map[string]int64
	// wake is closed and replaced whenever bytes are given back.
	wake chan struct{}
}

// NewBudget returns a Budget of total bytes, of which one key may hold at
// most perKey (0 or more than total means total).
func NewBudget(total, perKey int64) *Budget {
	if total < 1 {
		total = 1
	}
	if perKey < 1 || perKey > total {
		perKey = total
	}
	return &Budget{total: total, perKey: perKey, byKey: map[string]int64{}, wake: make(chan struct{})}
}

// Acquire waits until n bytes fit under the total and under the share of
// every one of keys, takes them, and returns the function that gives them
// back (calls after the first do nothing). n above the share counts as the
// share, so that a caller alone always gets through. It returns ctx's error
// when ctx ends first. A nil Budget gives at once.
func (b *Budget) Acquire(ctx context.Context, n int64, keys ...string) (release func(), err error) {
	if b == nil {
		return func() {}, nil
	}
	n = min(max(n, 1), b.perKey)
	for {
		b.mu.Lock()
		if b.fits(n, keys) {
			b.used += n
			for _, k := range keys {
				b.byKey[k] += n
			}
			b.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { b.release(n, keys) }) }, nil
		}
		wake := b.wake
		b.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// fits reports whether n more bytes fit; b.mu is held.
func (b *Budget) fits(n int64, keys []string) bool {
	if b.used+n > b.total {
		return false
	}
	for _, k := range keys {
		if b.byKey[k]+n > b.perKey {
			return false
		}
	}
	return true
}

func (b *Budget) release(n int64, keys []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	for _, k := range keys {
		if b.byKey[k] -= n; b.byKey[k] <= 0 {
			delete(b.byKey, k)
		}
	}
	close(b.wake)
	b.wake = make(chan struct{})
}

// Used returns the bytes held now.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
