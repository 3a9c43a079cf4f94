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
// forgets the sizes seen, its own batch's included, so the next lone call
// does not wait.
func TestGather(t *testing.T) {
	b, log := gathering()
	var wg sync.WaitGroup
	do := func(v int) {
		wg.Add(1)
		go func() { defer wg.Done(); b.Do(v) }()
	}

	do(0)
	for log.ran() < 1 {
		runtime.Gosched()
	}
	for i := 1; i <= 4; i++ {
		do(i)
	}
	for queued(b) < 4 {
		runtime.Gosched()
	}
	close(log.release)
	wg.Wait()

	// A lone call now waits for two more.
	do(5)
	for queued(b) < 1 && log.ran() == 2 {
		runtime.Gosched()
	}
	do(6)
	do(7)
	wg.Wait()
	if want := []int{1, 4, 3}; !slices.Equal(log.sizes, want) {
		t.Fatalf("batches %v, want %v", log.sizes, want)
	}

	// A wait that runs out forgets every size, its own batch's too.
	b.gather = time.Millisecond
	do(8)
	wg.Wait()
	if want := []int{1, 4, 3, 1}; !slices.Equal(log.sizes, want) {
		t.Fatalf("batches %v, want %v", log.sizes, want)
	}
	if largest := slices.Max(b.recent[:]); largest != 0 {
		t.Errorf("after a wait ran out, the largest recent batch is %d, want none", largest)
	}
	// So the next lone call runs at once, whatever the wait allowed.
	b.gather = time.Minute
	start := time.Now()
	b.Do(9)
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("a lone call after a wait ran out took %v: it waited", took)
	}
}

// Close ends a Gather wait at once, and the waiting call runs.
func TestGatherClose(t *testing.T) {
	b, log := gathering()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); b.Do(0) }()
	for queued(b) > 0 || !leading(b) {
		runtime.Gosched()
	}
	go func() { defer wg.Done(); b.Do(1) }()
	go func() { defer wg.Done(); b.Do(2) }()
	for queued(b) < 2 {
		runtime.Gosched()
	}
	close(log.release)
	wg.Wait() // batches [1, 2]: a lone call now waits for another

	ran := make(chan bool)
	go func() { ran <- b.Do(3) }()
	for queued(b) < 1 {
		runtime.Gosched()
	}
	start := time.Now()
	b.Close()
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("Close took %v: it waited for the gathering to run out", took)
	}
	if !<-ran {
		t.Error("the call queued before Close did not run")
	}
	if want := []int{1, 2, 1}; !slices.Equal(log.sizes, want) {
		t.Errorf("batches %v, want %v", log.sizes, want)
	}
}

// sizeLog records the sizes of the batches it runs, holding the first
// until release is closed, so that the calls after it queue up.
type sizeLog struct {
	mu      sync.Mutex
	sizes   []int
	release chan struct{}
}

func (l *sizeLog) run(vs []int) {
	l.mu.Lock()
	first := len(l.sizes) == 0
	l.sizes = append(l.sizes, len(vs))
	l.mu.Unlock()
	if first {
		<-l.release
	}
}

func (l *sizeLog) ran() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sizes)
}

// gathering returns a Batcher of up to 8 calls that gathers for a minute,
// and the log of its batches.
func gathering() (*Batcher[int], *sizeLog) {
	l := &sizeLog{release: make(chan struct{})}
	b := New(8, l.run)
	b.Gather(time.Minute)
	return b, l
}

func queued[T any](b *Batcher[T]) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

func leading[T any](b *Batcher[T]) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.leading
}
