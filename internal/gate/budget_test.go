package gate

import (
	"context"
	"testing"
	"time"
)

// One key holds at most its share; another key still gets bytes, up to the
// total; a waiter gets through once enough is given back.
func TestBudgetShares(t *testing.T) {
	b := NewBudget(100, 50)
	ctx := context.Background()
	relA, err := b.Acquire(ctx, 40, "addr-a", "acct-1")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := b.Acquire(short, 20, "addr-a", "acct-2"); err == nil {
		t.Fatal("addr-a got 60 bytes, past its share of 50")
	}
	short2, cancel2 := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel2()
	if _, err := b.Acquire(short2, 20, "addr-b", "acct-1"); err == nil {
		t.Fatal("acct-1 got 60 bytes, past its share of 50")
	}
	relB, err := b.Acquire(ctx, 50, "addr-b", "acct-2")
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Used(); got != 90 {
		t.Errorf("used %d, want 90", got)
	}
	done := make(chan error, 1)
	go func() {
		rel, err := b.Acquire(ctx, 30, "addr-c", "acct-3") // waits: 90 + 30 > 100
		if err == nil {
			rel()
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("got 30 bytes past the total: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	relA()
	relA() // a second call gives nothing back
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	relB()
	if got := b.Used(); got != 0 {
		t.Errorf("used %d after every release, want 0", got)
	}
	// More than a share counts as the share: a caller alone gets through.
	rel, err := b.Acquire(ctx, 1000, "addr-a")
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Used(); got != 50 {
		t.Errorf("used %d, want the share 50", got)
	}
	rel()
}
