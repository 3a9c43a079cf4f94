package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
)

// faultStore returns s as a store.Faults or skips the test.
func faultStore(t *testing.T, s Store) store.Faults {
	t.Helper()
	fs := s
	return fs
}

// newRule returns rule n of accountID, created n milliseconds after base.
func newRule(accountID string, n int, opts ...func(*store.FaultRule)) *store.FaultRule {
	p := 0.25
	r := &store.FaultRule{
		ID:          id(n),
		AccountID:   accountID,
		Stage:       store.FaultData,
		Reply:       &store.FaultReply{Code: 451, Text: "4.3.0 try later"},
		Delay:       1500 * time.Millisecond,
		Disconnect:  true,
		Recipient:   "a@acme.test",
		Sender:      "@app.test",
		Probability: &p,
		CreatedAt:   at(int64(n)),
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

func counted(n int64) func(*store.FaultRule) {
	return func(r *store.FaultRule) { r.Count, r.Remaining = n, n }
}

func wantRuleIDs(t *testing.T, fs store.Faults, accountID string, want ...string) []*store.FaultRule {
	t.Helper()
	got, err := fs.Faults(context.Background(), accountID)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(got))
	for i, r := range got {
		ids[i] = r.ID
	}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("rules of %s: got %v, want %v", accountID, ids, want)
	}
	return got
}

// testFaultRules checks that rules round-trip, list oldest first, stay in
// their account, and are consumed and deleted as documented.
func testFaultRules(t *testing.T, s Store) {
	fs := faultStore(t, s)
	ctx := context.Background()
	wantRuleIDs(t, fs, acctA)
	r1 := newRule(acctA, 1, func(r *store.FaultRule) { r.ExpiresAt = at(3_600_000) })
	r2 := newRule(acctA, 2, counted(2), func(r *store.FaultRule) { r.Reply, r.Probability = nil, nil })
	b1 := newRule(acctB, 3)
	for _, r := range []*store.FaultRule{r2, r1, b1} {
		if err := fs.CreateFault(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	got := wantRuleIDs(t, fs, acctA, r1.ID, r2.ID)
	for i, want := range []*store.FaultRule{r1, r2} {
		// JSON shows pointers' values and compares times by instant.
		g, _ := json.Marshal(got[i])
		w, _ := json.Marshal(want)
		if string(g) != string(w) {
			t.Errorf("rule %d: got %s, want %s", i, g, w)
		}
	}
	wantRuleIDs(t, fs, acctB, b1.ID)

	// Another account's id is not found, and a rule that is not counted
	// is never consumed.
	if err := fs.DeleteFault(ctx, acctB, r1.ID); !store.IsCode(err, store.NotFound) {
		t.Errorf("delete of another account's rule: got %v, want NotFound", err)
	}
	if ok, err := fs.ConsumeFault(ctx, acctB, r2.ID); ok || err != nil {
		t.Errorf("consume of another account's rule: got %v, %v, want false", ok, err)
	}
	if ok, err := fs.ConsumeFault(ctx, acctA, r1.ID); ok || err != nil {
		t.Errorf("consume of a rule that is not counted: got %v, %v, want false", ok, err)
	}

	// The counted rule goes with its last match.
	for i, want := range []bool{true, true, false} {
		ok, err := fs.ConsumeFault(ctx, acctA, r2.ID)
		if err != nil || ok != want {
			t.Fatalf("consume %d: got %v, %v, want %v", i, ok, err, want)
		}
		if i == 0 {
			if got := wantRuleIDs(t, fs, acctA, r1.ID, r2.ID); got[1].Remaining != 1 {
				t.Errorf("remaining after one: got %d, want 1", got[1].Remaining)
			}
		}
	}
	wantRuleIDs(t, fs, acctA, r1.ID)

	if err := fs.DeleteFault(ctx, acctA, r1.ID); err != nil {
		t.Fatal(err)
	}
	if err := fs.DeleteFault(ctx, acctA, r1.ID); !store.IsCode(err, store.NotFound) {
		t.Errorf("second delete: got %v, want NotFound", err)
	}
	wantRuleIDs(t, fs, acctA)
	if err := fs.DeleteFaults(ctx, acctB); err != nil {
		t.Fatal(err)
	}
	if err := fs.DeleteFaults(ctx, acctB); err != nil {
		t.Fatalf("delete all of an account without rules: %v", err)
	}
	wantRuleIDs(t, fs, acctB)
}

// testFaultExpiry checks that a create forgets the rules expired at its
// time, and only those.
func testFaultExpiry(t *testing.T, s Store) {
	fs := faultStore(t, s)
	ctx := context.Background()
	old := newRule(acctA, 1, func(r *store.FaultRule) { r.ExpiresAt = at(1000) })
	later := newRule(acctA, 2, counted(3), func(r *store.FaultRule) { r.ExpiresAt = at(5000) })
	for _, r := range []*store.FaultRule{old, later} {
		if err := fs.CreateFault(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// Expired rules are listed until a create forgets them.
	wantRuleIDs(t, fs, acctA, old.ID, later.ID)
	next := newRule(acctA, 3, func(r *store.FaultRule) { r.CreatedAt = at(1000) })
	if err := fs.CreateFault(ctx, next); err != nil {
		t.Fatal(err)
	}
	got := wantRuleIDs(t, fs, acctA, later.ID, next.ID)
	if got[0].Remaining != 3 {
		t.Errorf("remaining of the rule left: got %d, want 3", got[0].Remaining)
	}
}

// testFaultLimit checks that an account holds at most MaxFaultRules rules,
// that expired ones do not count, and that the limit is per account.
func testFaultLimit(t *testing.T, s Store) {
	fs := faultStore(t, s)
	ctx := context.Background()
	for n := range store.MaxFaultRules {
		r := newRule(acctA, n, func(r *store.FaultRule) {
			if n == 0 {
				r.ExpiresAt = at(10_000)
			}
		})
		if err := fs.CreateFault(ctx, r); err != nil {
			t.Fatalf("rule %d: %v", n, err)
		}
	}
	if err := fs.CreateFault(ctx, newRule(acctA, 1000)); !store.IsCode(err, store.Conflict) {
		t.Fatalf("one rule too many: got %v, want Conflict", err)
	}
	if err := fs.CreateFault(ctx, newRule(acctB, 1000)); err != nil {
		t.Fatalf("another account: %v", err)
	}
	// Once rule 0 has expired, its place is free.
	if err := fs.CreateFault(ctx, newRule(acctA, 1001, func(r *store.FaultRule) { r.CreatedAt = at(10_000) })); err != nil {
		t.Fatalf("after an expiry: %v", err)
	}
	rules, err := fs.Faults(ctx, acctA)
	if err != nil || len(rules) != store.MaxFaultRules {
		t.Fatalf("got %d rules, %v, want %d", len(rules), err, store.MaxFaultRules)
	}
}

// testFaultConsumeConcurrent checks that a counted rule's matches are
// taken exactly once each, however many callers race for them.
func testFaultConsumeConcurrent(t *testing.T, s Store) {
	fs := faultStore(t, s)
	ctx := context.Background()
	r := newRule(acctA, 1, counted(25))
	if err := fs.CreateFault(ctx, r); err != nil {
		t.Fatal(err)
	}
	var taken atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				ok, err := fs.ConsumeFault(ctx, acctA, r.ID)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					taken.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if got := taken.Load(); got != 25 {
		t.Errorf("matches taken: got %d, want 25", got)
	}
	wantRuleIDs(t, fs, acctA)
}

// testFaultReadsDuringChanges checks that a change is seen by the next read
// however many reads run meanwhile (a store that caches rules must never
// keep what a read took before a change), and that what a read returns is
// the caller's to change.
func testFaultReadsDuringChanges(t *testing.T, s Store) {
	fs := faultStore(t, s)
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { // also when a check fails
		close(stop)
		wg.Wait()
	}()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := fs.Faults(ctx, acctA); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var ids []string
	for n := 1; n <= 30; n++ {
		r := newRule(acctA, n, counted(2))
		if err := fs.CreateFault(ctx, r); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
		wantRuleIDs(t, fs, acctA, ids...)
		if ok, err := fs.ConsumeFault(ctx, acctA, r.ID); !ok || err != nil {
			t.Fatalf("consume rule %d: got %v, %v", n, ok, err)
		}
		if got := wantRuleIDs(t, fs, acctA, ids...); got[n-1].Remaining != 1 {
			t.Fatalf("rule %d after a consume: %d remaining, want 1", n, got[n-1].Remaining)
		}
	}
	for n := 30; n > 20; n-- {
		if err := fs.DeleteFault(ctx, acctA, ids[n-1]); err != nil {
			t.Fatal(err)
		}
		ids = ids[:n-1]
		wantRuleIDs(t, fs, acctA, ids...)
	}

	got := wantRuleIDs(t, fs, acctA, ids...)
	got[0].Remaining, got[0].Stage = 99, store.FaultRcpt
	got[0].Reply.Text, *got[0].Probability = "changed", 1
	got[1] = nil
	again := wantRuleIDs(t, fs, acctA, ids...)
	if r := again[0]; r.Remaining != 1 || r.Stage != store.FaultData || r.Reply.Text != "4.3.0 try later" || *r.Probability != 0.25 || again[1] == nil {
		t.Errorf("a read after the caller changed what the last one returned: %+v, reply %+v, probability %v", r, *r.Reply, *r.Probability)
	}
}
