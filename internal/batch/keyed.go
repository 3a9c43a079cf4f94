package batch

import "sync"

// Keyed is a Batcher per key, made at the key's first call: calls of
// different keys never share a batch nor wait for each other's, so that a
// slow store shard (an account's, failing over) holds up only its own.
// Keys are expected to be few and bounded (the configured accounts).
type Keyed[T any] struct {
	size int
	run  func([]T)

	mu       sync.Mutex
	batchers map[string]*Batcher[T]
	closed   bool
}

// NewKeyed returns a Keyed whose Batchers are New(size, run).
func NewKeyed[T any](size int, run func([]T)) *Keyed[T] {
	return &Keyed[T]{size: size, run: run, batchers: map[string]*Batcher[T]{}}
}

// Do runs v in a batch of key's calls (Batcher.Do). It reports false,
// without running v, after Close.
func (k *Keyed[T]) Do(key string, v T) bool {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return false
	}
	b := k.batchers[key]
	if b == nil {
		b = New(k.size, k.run)
		k.batchers[key] = b
	}
	k.mu.Unlock()
	return b.Do(v)
}

// Close closes every Batcher, waiting for the batches they run, and makes
// later calls report false.
func (k *Keyed[T]) Close() {
	k.mu.Lock()
	k.closed = true
	batchers := k.batchers
	k.mu.Unlock()
	for _, b := range batchers {
		b.Close()
	}
}
