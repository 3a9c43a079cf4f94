package ingest

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/pebblestore"
)

// failingAccount is a real embedded store whose creates for one account fail
// as a store outage would, until healed.
type failingAccount struct {
	*pebblestore.Store
	mu      sync.Mutex
	account string
}

func (f *failingAccount) CreateEmails(ctx context.Context, body *store.Body, emails []*store.Email) error {
	f.mu.Lock()
	fail := f.account != "" && emails[0].AccountID == f.account
	f.mu.Unlock()
	if fail {
		return store.Errorf(store.Unavailable, "the test's outage")
	}
	return f.Store.CreateEmails(ctx, body, emails)
}

func (f *failingAccount) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.account = ""
}

func newFailing(t *testing.T, account string) (*Service, *failingAccount) {
	t.Helper()
	return newFailingWith(t, account, Config{})
}

func newFailingWith(t *testing.T, account string, cfg Config) (*Service, *failingAccount) {
	t.Helper()
	st, err := pebblestore.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	f := &failingAccount{Store: st, account: account}
	return New(f, func() time.Time { return now }, cfg), f
}

var twoAccounts = Envelope{Sender: "app@example.com", Recipients: []Recipient{
	rcpt("a@acme.test", acme), rcpt("b@globex.test", globex),
}}

// A delivery to several accounts that fails on a later account stores
// nothing: the sender retries the whole delivery, and must not find the
// earlier account's copy there already.
// Config.Stored hears of the delivery that stored, not of the failed one.
func TestFailedDeliveryStoresNothing(t *testing.T) {
	t.Parallel()
	var told [][]*store.Email
	svc, st := newFailingWith(t, globex.ID, Config{Stored: func(raw []byte, emails []*store.Email) {
		told = append(told, emails)
	}})
	raw := message("Subject: hi", "", "body")
	if _, err := svc.Deliver(context.Background(), raw, twoAccounts); !store.IsCode(err, store.Unavailable) {
		t.Fatalf("Deliver = %v, want the outage", err)
	}
	if got := stored(t, st, acme); len(got) != 0 {
		t.Fatalf("acme keeps %d emails of a failed delivery, want 0", len(got))
	}
	if len(told) != 0 {
		t.Errorf("Stored was told of a failed delivery: %v", told)
	}
	st.heal()
	got, err := svc.Deliver(context.Background(), raw, twoAccounts)
	if err != nil {
		t.Fatal(err)
	}
	if a, g := len(stored(t, st, acme)), len(stored(t, st, globex)); a != 1 || g != 1 {
		t.Errorf("after the retry: acme %d, globex %d emails; want 1 and 1", a, g)
	}
	if len(told) != 1 || len(told[0]) != 2 || told[0][0].ID != got[0].ID || told[0][1].ID != got[1].ID {
		t.Errorf("Stored was told of %v, want once of the stored %v", told, got)
	}
}

// With a key, a retry finds what the failed attempt stored and stores only
// the rest; a plain repeat stores nothing and answers with the same emails.
func TestDeliveryWithKeyIsStoredOnce(t *testing.T) {
	t.Parallel()
	svc, st := newFailing(t, globex.ID)
	raw := message("Subject: hi", "", "body")
	env := twoAccounts
	env.IdempotencyKey = "delivery-1"
	if _, err := svc.Deliver(context.Background(), raw, env); !store.IsCode(err, store.Unavailable) {
		t.Fatalf("Deliver = %v, want the outage", err)
	}
	st.heal()
	first, err := svc.Deliver(context.Background(), raw, env)
	if err != nil {
		t.Fatal(err)
	}
	again, err := svc.Deliver(context.Background(), raw, env)
	if err != nil {
		t.Fatal(err)
	}
	for i := range first {
		if first[i].ID != again[i].ID || first[i].Recipient != again[i].Recipient {
			t.Errorf("repeat answered email %s (%s), the first %s (%s)", again[i].ID, again[i].Recipient, first[i].ID, first[i].Recipient)
		}
	}
	if a, g := len(stored(t, st, acme)), len(stored(t, st, globex)); a != 1 || g != 1 {
		t.Errorf("acme %d, globex %d emails; want 1 and 1", a, g)
	}
	// The same key for another message is a conflict, and stores nothing.
	_, err = svc.Deliver(context.Background(), message("Subject: other", "", "body"), env)
	wantCode(t, err, store.Conflict)
	if got, want := err.Error(), "in the last 24 hours"; !strings.Contains(got, want) {
		t.Errorf("conflict %q, want it to say %q", got, want)
	}
	// The same message without a key is a new delivery: tests may send a
	// message twice on purpose.
	if _, err := svc.Deliver(context.Background(), raw, twoAccounts); err != nil {
		t.Fatal(err)
	}
	if a := len(stored(t, st, acme)); a != 2 {
		t.Errorf("acme has %d emails after a keyless repeat, want 2", a)
	}
}

func TestCreateWithKeyIsStoredOnce(t *testing.T) {
	t.Parallel()
	svc, st := newService(t, Config{})
	text := "hello"
	in := NewEmail{AccountID: acme.ID, Sender: "s@example.com", Recipient: "r@acme.test",
		Text: &Optional{Value: &text}, IdempotencyKey: "create-1"}
	var wg sync.WaitGroup
	ids := make([]string, 6)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := svc.Create(context.Background(), in)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = e.ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent repeats answered ids %v, want one id", ids)
		}
	}
	if got := stored(t, st, acme); len(got) != 1 {
		t.Fatalf("%d emails stored, want 1", len(got))
	}
	other := "bye"
	in.Text = &Optional{Value: &other}
	_, err := svc.Create(context.Background(), in)
	wantCode(t, err, store.Conflict)
}

// A message composed from a create request is bounded like a given raw.
func TestCreateComposedIsBounded(t *testing.T) {
	t.Parallel()
	svc, st := newService(t, Config{MaxMessageBytes: 1000})
	text := "\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0c" // quoted-printable triples each
	for len(text) < 500 {
		text += text
	}
	_, err := svc.Create(context.Background(), NewEmail{AccountID: acme.ID, Sender: "s@example.com",
		Recipient: "r@acme.test", Text: &Optional{Value: &text}})
	wantCode(t, err, store.TooLarge)
	if got := stored(t, st, acme); len(got) != 0 {
		t.Errorf("%d emails stored, want 0", len(got))
	}
}

// gatedStore is a real embedded store whose first create waits until the
// test lets it go on, to order two requests the way a loaded machine may.
type gatedStore struct {
	*pebblestore.Store
	once    sync.Once
	waiting chan struct{} // closed when the first create waits
	goOn    chan struct{}
}

func (g *gatedStore) CreateEmails(ctx context.Context, body *store.Body, emails []*store.Email) error {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.waiting)
		<-g.goOn
	}
	return g.Store.CreateEmails(ctx, body, emails)
}

// Found by review: a key's first request, overtaken by its retry, answered
// 409 although its email was stored; a repeat after a delete stored the
// email again; a retry of a request refused by the quota got past it.
func TestIdempotencyEdges(t *testing.T) {
	t.Parallel()
	newStore := func(t *testing.T) *pebblestore.Store {
		st, err := pebblestore.Open(filepath.Join(t.TempDir(), "store"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	text := "hello"
	in := NewEmail{AccountID: acme.ID, Sender: "s@example.com", Recipient: "r@acme.test", Text: &Optional{Value: &text}, IdempotencyKey: "k"}

	t.Run("overtaken by its retry", func(t *testing.T) {
		g := &gatedStore{Store: newStore(t), waiting: make(chan struct{}), goOn: make(chan struct{})}
		svc := New(g, func() time.Time { return now }, Config{})
		first := make(chan error, 1)
		var firstID string
		go func() {
			e, err := svc.Create(context.Background(), in)
			if err == nil {
				firstID = e.ID
			}
			first <- err
		}()
		<-g.waiting
		retry, err := svc.Create(context.Background(), in)
		if err != nil {
			t.Fatalf("the retry: %v", err)
		}
		close(g.goOn)
		if err := <-first; err != nil {
			t.Fatalf("the first request, overtaken by its retry: %v, want success", err)
		}
		if firstID != retry.ID {
			t.Errorf("first answered %s, retry %s", firstID, retry.ID)
		}
		if n := len(stored(t, g, acme)); n != 1 {
			t.Errorf("%d emails stored, want 1", n)
		}
	})

	t.Run("repeat after delete", func(t *testing.T) {
		st := newStore(t)
		svc := New(st, func() time.Time { return now }, Config{})
		e, err := svc.Create(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.DeleteEmail(context.Background(), acme.ID, e.ID); err != nil {
			t.Fatal(err)
		}
		again, err := svc.Create(context.Background(), in)
		if err != nil || again.ID != e.ID {
			t.Fatalf("repeat after delete: %v, %v; want the first's answer", again, err)
		}
		if n := len(stored(t, st, acme)); n != 0 {
			t.Errorf("a repeat after the delete stored the email again (%d stored)", n)
		}
	})

	t.Run("retry of a request over the quota", func(t *testing.T) {
		st := newStore(t)
		svc := New(st, func() time.Time { return now }, Config{Quota: func(string) (int64, int64) { return 1, 0 }})
		other := in
		other.IdempotencyKey = ""
		if _, err := svc.Create(context.Background(), other); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			_, err := svc.Create(context.Background(), in)
			if !store.IsCode(err, store.QuotaExceeded) {
				t.Fatalf("attempt %d past the quota: %v, want QuotaExceeded", i+1, err)
			}
		}
		if n := len(stored(t, st, acme)); n != 1 {
			t.Errorf("%d emails stored, want the quota of 1", n)
		}
	})
}

// A provider's delivery id becomes a key that no crossKey can equal.
func TestPrintableKey(t *testing.T) {
	if got := PrintableKey("a-b_C.9~ "); got != "a-b_C.9~ " {
		t.Errorf("printable id changed: %q", got)
	}
	odd := PrintableKey("\x00acct\x00run-1")
	if len(odd) != 64 || strings.ContainsAny(odd, "\x00") || odd == PrintableKey("\x00acct\x00run-2") {
		t.Errorf("non-printable id: %q, want a distinct SHA-256 in hex", odd)
	}
	if k := crossKey("acct", "run-1"); k[0] != 0 || PrintableKey(k) == k {
		t.Errorf("crossKey %q can be a printable key", k)
	}
}
