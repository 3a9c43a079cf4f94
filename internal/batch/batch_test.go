package batch

import (
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
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

// With Gather, a batch waits for the calls recent batches suggest: after a
// batch of 4, a lone call waits until 3 are queued. A wait that runs out
// forgets the sizes seen, so the next lone call does not wait.
func TestGather(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	release := make(chan struct{})
	b := New(8, func(vs []int) {
		mu.Lock()
		first := len(sizes) == 0
		sizes = append(sizes, len(vs))
		mu.Unlock()
		if first {
			<-release // hold the first batch so that the next one holds 4
		}
	})
	b.Gather(time.Hour)
	ran := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(sizes)
	}
	queued := func() (int, bool) {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue), b.leading
	}
	var wg sync.WaitGroup
	do := func(v int) {
		wg.Add(1)
		go func() { defer wg.Done(); b.Do(v) }()
	}

	do(0)
	for ran() < 1 {
		runtime.Gosched()
	}
	for i := 1; i <= 4; i++ {
		do(i)
	}
	for n, _ := queued(); n < 4; n, _ = queued() {
		runtime.Gosched()
	}
	close(release)
	wg.Wait()

	// A lone call now waits for two more.
	do(5)
	for {
		if ran() > 2 {
			t.Fatalf("a lone call ran at once after a batch of 4: batches %v", sizes)
		}
		if n, leading := queued(); n == 1 && leading {
			break
		}
		runtime.Gosched()
	}
	do(6)
	do(7)
	wg.Wait()
	if want := []int{1, 4, 3}; !slices.Equal(sizes, want) {
		t.Fatalf("batches %v, want %v", sizes, want)
	}

	// A wait that runs out forgets: the sizes seen are those after it.
	b.gather = time.Millisecond
	do(8)
	wg.Wait()
	if want := []int{1, 4, 3, 1}; !slices.Equal(sizes, want) {
		t.Fatalf("batches %v, want %v", sizes, want)
	}
	if largest := slices.Max(b.recent[:]); largest != 1 {
		t.Errorf("after a wait ran out, the largest recent batch is %d, want 1 (the lone one)", largest)
	}
}
