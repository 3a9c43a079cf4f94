package gate

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestOneKeyCannotTakeEveryTurn(t *testing.T) {
	t.Parallel()
	g := New(2, 1)
	ctx := context.Background()
	rel, err := g.Acquire(ctx, "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := g.Acquire(short, "10.0.0.1"); err == nil {
		t.Fatal("a second turn for the same key was given while one was held")
	}
	other, err := g.Acquire(ctx, "10.0.0.2")
	if err != nil {
		t.Fatalf("another key waited although a turn was free: %v", err)
	}
	if a, w := g.Counts(); a != 2 || w != 0 {
		t.Errorf("counts = %d active, %d waiting; want 2, 0", a, w)
	}
	other()
	rel()
	rel() // a second call changes nothing
	if a, _ := g.Counts(); a != 0 {
		t.Errorf("%d turns held after every release, want 0", a)
	}
}

func TestWaitersGetTurnsAsTheyAreGivenBack(t *testing.T) {
	t.Parallel()
	g := New(2, 2)
	var mu sync.Mutex
	held, most := 0, 0
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rel, err := g.Acquire(context.Background(), "k")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			held++
			most = max(most, held)
			mu.Unlock()
			mu.Lock()
			held--
			mu.Unlock()
			rel()
		}()
	}
	wg.Wait()
	if most > 2 {
		t.Errorf("%d turns held at once, want at most 2", most)
	}
	if a, w := g.Counts(); a != 0 || w != 0 {
		t.Errorf("counts = %d, %d after all finished; want 0, 0", a, w)
	}
}
