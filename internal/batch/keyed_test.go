package batch

import (
	"sync"
	"testing"
)

// TestKeyedKeepsKeysApart: calls of one key share batches, calls of another
// are never in them, and after Close no call runs.
func TestKeyedKeepsKeysApart(t *testing.T) {
	t.Parallel()
	type v struct{ key string }
	var mu sync.Mutex
	mixed := false
	ran := 0
	k := NewKeyed(8, func(vs []*v) {
		mu.Lock()
		defer mu.Unlock()
		for _, x := range vs {
			if x.key != vs[0].key {
				mixed = true
			}
		}
		ran += len(vs)
	})
	var wg sync.WaitGroup
	for i := range 200 {
		key := []string{"a", "b", "c"}[i%3]
		wg.Go(func() {
			if !k.Do(key, &v{key: key}) {
				t.Error("Do before Close reported false")
			}
		})
	}
	wg.Wait()
	k.Close()
	if k.Do("a", &v{key: "a"}) || k.Do("d", &v{key: "d"}) {
		t.Error("Do after Close ran its call")
	}
	if mixed || ran != 200 {
		t.Errorf("mixed keys in a batch: %v; ran %d calls, want 200", mixed, ran)
	}
}
