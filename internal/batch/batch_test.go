package batch

import (
	"sync"
	"testing"
)

// Every call runs exactly once, in a batch of at most the maximum size, and
// calls that overlap share batches.
func TestEveryCallRunsOnce(t *testing.T) {
	var mu sync.Mutex
	ran := map[int]int{}
	batches, largest := 0, 0
	release := make(chan struct{})
	first := true
	b := New(4, func(vs []int) {
		mu.Lock()
		isFirst := first
		first = false
		batches++
		largest = max(largest, len(vs))
		for _, v := range vs {
			ran[v]++
		}
		mu.Unlock()
		if isFirst {
			<-release // hold the first batch so that the others queue up
		}
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); b.Do(0) }()
	// Wait until call 0 leads (its batch is running), then queue 20 more.
	for {
		mu.Lock()
		started := batches == 1
		mu.Unlock()
		if started {
			break
		}
	}
	const calls = 20
	for i := 1; i <= calls; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !b.Do(i) {
				t.Errorf("Do(%d) reported closed", i)
			}
		}()
	}
	for queued := 0; queued < calls; {
		b.mu.Lock()
		queued = len(b.queue)
		b.mu.Unlock()
	}
	close(release)
	wg.Wait()
	for i := 0; i <= calls; i++ {
		if ran[i] != 1 {
			t.Errorf("call %d ran %d times", i, ran[i])
		}
	}
	if largest > 4 {
		t.Errorf("a batch held %d calls, max is 4", largest)
	}
	// 1 for call 0, then 20 queued calls in batches of 4.
	if batches != 1+calls/4 {
		t.Errorf("%d batches, want %d", batches, 1+calls/4)
	}
}

// After Close, Do runs nothing and reports false; Close waits for the
// batch under way.
func TestClose(t *testing.T) {
	running := make(chan struct{})
	release := make(chan struct{})
	var done sync.WaitGroup
	b := New(8, func([]string) {
		close(running)
		<-release
	})
	done.Add(1)
	go func() { defer done.Done(); b.Do("first") }()
	<-running
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a batch ran")
	default:
	}
	close(release)
	<-closed
	done.Wait()
	if b.Do("late") {
		t.Error("Do after Close reported true")
	}
}
