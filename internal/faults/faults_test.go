package faults

import (
	"context"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/pebblestore"
)

func TestAddressMatches(t *testing.T) {
	t.Parallel()
	tests := []struct {
		filter, addr string
		want         bool
	}{
		{"a@acme.test", "a@acme.test", true},
		{"a@acme.test", "A@ACME.test", true},
		{"a@acme.test", "b@acme.test", false},
		{"@acme.test", "b@Acme.Test", true},
		{"@acme.test", "b@sub.acme.test", false},
		{"@acme.test", "b@notacme.test", false},
		{"@acme.test", "", false},
		{"a@acme.test", "", false},
	}
	for _, tt := range tests {
		if got := AddressMatches(tt.filter, tt.addr); got != tt.want {
			t.Errorf("AddressMatches(%q, %q) = %v, want %v", tt.filter, tt.addr, got, tt.want)
		}
	}
}

func TestMaxDelay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		readTimeout, want time.Duration
	}{
		{0, 4 * time.Minute},
		{time.Hour, 4 * time.Minute},
		{60 * time.Second, 54 * time.Second},
		{5 * time.Second, 4 * time.Second},
		{time.Second, time.Second},
	}
	for _, tt := range tests {
		if got := MaxDelay(tt.readTimeout); got != tt.want {
			t.Errorf("MaxDelay(%v) = %v, want %v", tt.readTimeout, got, tt.want)
		}
	}
}

// openStore returns an embedded store in the test's directory, closed when
// the test ends.
func openStore(t *testing.T) *pebblestore.Store {
	t.Helper()
	st, err := pebblestore.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestCheck checks which rule a point meets, on the embedded store.
func TestCheck(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	draw := 0.5
	in := New(st, Config{Now: func() time.Time { return now }, Rand: func() float64 { return draw }})
	ctx := context.Background()
	create := func(r *store.FaultRule, expiresIn time.Duration) *store.FaultRule {
		t.Helper()
		r.Reply = &store.FaultReply{Code: 451}
		if err := in.Create(ctx, "acme", r, expiresIn); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Millisecond) // rules are checked oldest first
		return r
	}
	p := func(v float64) *float64 { return &v }
	counted := create(&store.FaultRule{Stage: store.FaultRcpt, Recipient: "a@acme.test", Count: 2}, 0)
	likely := create(&store.FaultRule{Stage: store.FaultRcpt, Sender: "@app.test", Probability: p(0.6)}, 0)
	expiring := create(&store.FaultRule{Stage: store.FaultData}, time.Second)

	rcpt := func(sender, to string) *store.FaultRule {
		return in.Check(ctx, Point{Stage: store.FaultRcpt, AccountID: "acme", Sender: sender, Recipients: []string{to}})
	}
	for i, want := range []*store.FaultRule{counted, counted, nil} {
		if got := rcpt("x@example.com", "a@acme.test"); got != nil != (want != nil) || got != nil && got.ID != want.ID {
			t.Errorf("send %d to a@acme.test: got %v, want %v", i, got, want)
		}
	}
	if got := rcpt("x@app.test", "b@acme.test"); got == nil || got.ID != likely.ID {
		t.Errorf("draw 0.5 under 0.6: got %v, want the probability rule", got)
	}
	draw = 0.6
	if got := rcpt("x@app.test", "b@acme.test"); got != nil {
		t.Errorf("draw 0.6, not under 0.6: got %v, want none", got)
	}
	if got := in.Check(ctx, Point{Stage: store.FaultData, AccountID: "other"}); got != nil {
		t.Errorf("another account: got %v, want none", got)
	}
	if got := in.Check(ctx, Point{Stage: store.FaultData, AccountID: "acme"}); got == nil || got.ID != expiring.ID {
		t.Errorf("data before expiry: got %v", got)
	}
	now = now.Add(time.Second)
	if got := in.Check(ctx, Point{Stage: store.FaultData, AccountID: "acme"}); got != nil {
		t.Errorf("data after expiry: got %v, want none", got)
	}
	rules, err := in.List(ctx, "acme")
	if err != nil || len(rules) != 1 || rules[0].ID != likely.ID {
		t.Errorf("List: got %v, %v, want only the probability rule", rules, err)
	}
}

// faultStore names the embedded store in the wrappers below (store.Faults
// would clash with its method Faults).
type faultStore = store.Faults

// countingFaults counts the reads of a store.Faults.
type countingFaults struct {
	faultStore
	mu    sync.Mutex
	reads map[string]int
}

func (c *countingFaults) Faults(ctx context.Context, accountID string) ([]*store.FaultRule, error) {
	c.mu.Lock()
	c.reads[accountID]++
	c.mu.Unlock()
	return c.faultStore.Faults(ctx, accountID)
}

// A batch of Rules calls for one account reads its rules once, and
// concurrent calls for several accounts each get their own account's rules.
func TestReadRulesOncePerBatch(t *testing.T) {
	t.Parallel()
	bs := openStore(t)
	ctx := context.Background()
	fs := &countingFaults{faultStore: bs, reads: map[string]int{}}
	in := New(fs, Config{ShareReads: true})
	for _, acc := range []string{"acc-a", "acc-b"} {
		r := &store.FaultRule{Stage: store.FaultMail, Reply: &store.FaultReply{Code: 451, Text: acc}}
		if err := in.Create(ctx, acc, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	reads := []*rulesRead{{ctx: ctx, accountID: "acc-a"}, {ctx: ctx, accountID: "acc-a"}, {ctx: ctx, accountID: "acc-a"}}
	in.readRules(reads)
	for i, r := range reads {
		if r.err != nil || len(r.rules) != 1 || r.rules[0].Reply.Text != "acc-a" {
			t.Errorf("call %d got %+v, %v", i, r.rules, r.err)
		}
	}
	if want := map[string]int{"acc-a": 1}; !reflect.DeepEqual(fs.reads, want) {
		t.Errorf("reads %v, want %v", fs.reads, want)
	}
	accounts := []string{"acc-a", "acc-b"}

	// Concurrent calls through the batches get their own account's rules.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			acc := accounts[i%2]
			if rules := in.Rules(ctx, acc); len(rules) != 1 || rules[0].Reply.Text != acc {
				t.Errorf("Rules(%s) = %+v", acc, rules)
			}
		}()
	}
	wg.Wait()
}

// blockingFaults blocks the reads of one account until released.
type blockingFaults struct {
	faultStore
	slow    string
	started chan struct{} // closed when the slow account's read begins
	release chan struct{}
}

func (b *blockingFaults) Faults(ctx context.Context, accountID string) ([]*store.FaultRule, error) {
	if accountID == b.slow {
		close(b.started)
		<-b.release
	}
	return b.faultStore.Faults(ctx, accountID)
}

// A read of one account that hangs (its Redis shard failing over) does not
// hold up the transactions of another account.
func TestSlowAccountHoldsNoOther(t *testing.T) {
	t.Parallel()
	bs := openStore(t)
	ctx := context.Background()
	fs := &blockingFaults{faultStore: bs, slow: "slow", started: make(chan struct{}), release: make(chan struct{})}
	in := New(fs, Config{ShareReads: true})
	r := &store.FaultRule{Stage: store.FaultMail, Reply: &store.FaultReply{Code: 451, Text: "fast"}}
	if err := in.Create(ctx, "fast", r, 0); err != nil {
		t.Fatal(err)
	}
	slowDone := make(chan struct{})
	go func() {
		defer close(slowDone)
		in.Rules(ctx, "slow")
	}()
	<-fs.started
	for range 3 {
		if rules := in.Rules(ctx, "fast"); len(rules) != 1 || rules[0].Reply.Text != "fast" {
			t.Errorf("Rules(fast) = %+v while another account's read hangs", rules)
		}
	}
	close(fs.release)
	<-slowDone
}
