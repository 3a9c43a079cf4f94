package search

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/bodies"
	"github.com/mailsink/mailsink/internal/ingest"
	"github.com/mailsink/mailsink/internal/mailparse"
	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/pebblestore"
)

// readCounter is a real store that counts the reads of bodies and check
// results that the digests' old path makes, the writes of check results
// (the number of PutCheck calls, and the size of each PutChecks call in
// order), and the lists of the account.
type readCounter struct {
	*pebblestore.Store
	bodies, checks atomic.Int64
	puts           atomic.Int64
	mu             sync.Mutex
	batches        []int
	// onGetCheck, when set before the services run, is called by each
	// GetCheck before it reads.
	onGetCheck func()
	// lists counts the lists that loading an account makes.
	lists atomic.Int64
}

func (c *readCounter) ListEmails(ctx context.Context, q store.ListQuery) ([]*store.Email, error) {
	c.lists.Add(1)
	return c.Store.ListEmails(ctx, q)
}

func (c *readCounter) PutCheck(ctx context.Context, accountID, id, name string, result []byte) error {
	c.puts.Add(1)
	return c.Store.PutCheck(ctx, accountID, id, name, result)
}

func (c *readCounter) PutChecks(ctx context.Context, accountID, name string, results map[string][]byte) error {
	c.mu.Lock()
	c.batches = append(c.batches, len(results))
	c.mu.Unlock()
	return c.Store.PutChecks(ctx, accountID, name, results)
}

func (c *readCounter) putBatches() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.batches)
}

func (c *readCounter) GetBody(ctx context.Context, accountID, id string) (*store.Body, error) {
	c.bodies.Add(1)
	return c.Store.GetBody(ctx, accountID, id)
}

func (c *readCounter) GetCheck(ctx context.Context, accountID, id, name string) ([]byte, error) {
	c.checks.Add(1)
	if c.onGetCheck != nil {
		c.onGetCheck()
	}
	return c.Store.GetCheck(ctx, accountID, id, name)
}

// freshSetup runs a Service and an ingest Service over one store in memory,
// the ingest telling the search service of what it stores.
func freshSetup(t *testing.T) (*Service, *ingest.Service, *readCounter, *store.Account) {
	t.Helper()
	s, ing, rc, acc := freshServices(t)
	run(t, s)
	return s, ing, rc, acc
}

// freshServices is freshSetup without running the search service.
func freshServices(t *testing.T) (*Service, *ingest.Service, *readCounter, *store.Account) {
	t.Helper()
	st, err := pebblestore.OpenInMemory(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rc := &readCounter{Store: st}
	acc := &store.Account{ID: "acme-id", Slug: "acme"}
	s := NewService(rc, Config{Accounts: func() []*store.Account { return []*store.Account{acc} },
		Bodies: bodies.New(rc, bodies.Config{CacheBytes: -1})})
	ing := ingest.New(rc, time.Now, ingest.Config{Stored: s.Fresh})
	return s, ing, rc, acc
}

// run runs s until the test ends.
func run(t *testing.T, s *Service) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitDigest waits until the index has the digest of the email.
func waitDigest(t *testing.T, s *Service, accountID, id string) *Digest {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if d := s.idx.Digest(accountID, id); d != nil {
			return d
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no digest of %s after 20s", id)
	return nil
}

func TestDigestOfFreshMailIsMadeFromTheBytesInHand(t *testing.T) {
	t.Parallel()
	// The service starts after the delivery: started before, its worker
	// can take the emails' events before Deliver hands over the source
	// (Stored runs once the create has answered), and then rightly reads
	// them back from the store.
	s, ing, rc, acc := freshServices(t)
	raw := []byte("From: a@example.com\r\nTo: b@example.com\r\nSubject: fresh\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n\r\nthe word zanzibar is in the body\r\n")
	env := ingest.Envelope{Sender: "a@example.com", Recipients: []ingest.Recipient{
		{Address: "b@example.com", Account: acc}, {Address: "c@example.com", Account: acc}}}
	emails, err := ing.Deliver(context.Background(), raw, env)
	if err != nil {
		t.Fatal(err)
	}
	run(t, s)
	msg, _ := mailparse.Parse(raw)
	want := MakeDigest(Content{Headers: msg.Body.Headers, Text: msg.Body.Text, HTML: msg.Body.HTML})
	for _, e := range emails {
		waitDigest(t, s, acc.ID, e.ID)
		// Kept in the store, for replicas and restarts (the index keeps
		// the text's words, not the text).
		v, err := rc.Store.GetCheck(context.Background(), acc.ID, e.ID, digestCheck)
		var got Digest
		if err == nil {
			err = json.Unmarshal(v, &got)
		}
		if err != nil || !reflect.DeepEqual(&got, want) {
			t.Errorf("digest of %s in the store: %+v, %v\nwant %+v", e.ID, got, err, want)
		}
	}
	if ids, err := s.IDs(context.Background(), store.ListQuery{AccountID: acc.ID, Limit: 10}, mustParse(t, "zanzibar")); err != nil || len(ids) != 2 {
		t.Errorf("search for a body word: %v, %v; want both emails", ids, err)
	}
	if n, m := rc.bodies.Load(), rc.checks.Load(); n != 0 || m != 0 {
		t.Errorf("the digests read %d bodies and %d check results from the store, want none", n, m)
	}
	nothingKept(t, s)
}

// nothingKept fails t when Fresh still holds a source.
func nothingKept(t *testing.T, s *Service) {
	t.Helper()
	s.freshMu.Lock()
	held, kept := s.freshBytes, len(s.fresh)
	s.freshMu.Unlock()
	if held != 0 || kept != 0 {
		t.Errorf("%d sources of %d bytes still kept after their digests", kept, held)
	}
}

// TestDigestsQueuedTogetherAreKeptInOneCall queues the digests of several
// fresh emails before the digest worker starts: it takes them together,
// keeps them in the store with one PutChecks, and every email becomes
// searchable by its body.
func TestDigestsQueuedTogetherAreKeptInOneCall(t *testing.T) {
	t.Parallel()
	s, ing, rc, acc := freshServices(t)
	const messages = 5
	var emails []*store.Email
	for i := range messages {
		raw := fmt.Appendf(nil, "From: a@example.com\r\nTo: b@example.com\r\nSubject: batch %d\r\n"+
			"Content-Type: text/plain; charset=utf-8\r\n\r\nthe word quokka%d and the word wombat\r\n", i, i)
		env := ingest.Envelope{Sender: "a@example.com", Recipients: []ingest.Recipient{
			{Address: "b@example.com", Account: acc}, {Address: "c@example.com", Account: acc}}}
		got, err := ing.Deliver(context.Background(), raw, env)
		if err != nil {
			t.Fatal(err)
		}
		emails = append(emails, got...)
	}
	// What loading the account does for each email, before the worker
	// runs, so that all are queued when it takes the first.
	for _, e := range emails {
		s.idx.Put(e)
		s.queue(e.AccountID, e.ID)
	}
	run(t, s)
	for _, e := range emails {
		waitDigest(t, s, acc.ID, e.ID)
	}
	if got, want := rc.putBatches(), []int{len(emails)}; !slices.Equal(got, want) {
		t.Errorf("PutChecks calls of %v results, want one of %d", got, len(emails))
	}
	if n := rc.puts.Load(); n != 0 {
		t.Errorf("%d PutCheck calls, want none", n)
	}
	stored, err := rc.Store.GetChecks(context.Background(), acc.ID, ids(emails), digestCheck)
	if err != nil || len(stored) != len(emails) {
		t.Errorf("GetChecks of the digests = %d of %d, %v", len(stored), len(emails), err)
	}
	if got, err := s.IDs(context.Background(), store.ListQuery{AccountID: acc.ID}, mustParse(t, "wombat")); err != nil || len(got) != len(emails) {
		t.Errorf("search for the common body word: %d emails, %v; want %d", len(got), err, len(emails))
	}
	for i := range messages {
		got, err := s.IDs(context.Background(), store.ListQuery{AccountID: acc.ID}, mustParse(t, fmt.Sprintf("quokka%d", i)))
		if want := ids(emails[2*i : 2*i+2]); err != nil || !equalSets(got, want) {
			t.Errorf("search for quokka%d: %v, %v; want %v", i, got, err, want)
		}
	}
	if n := rc.bodies.Load(); n != 0 {
		t.Errorf("the digests read %d bodies from the store, want none", n)
	}
}

// TestSourceThatComesDuringTheStoreReadIsUsed has ingest tell Fresh of an
// email only after its digest was queued and while the worker asks the
// store for a digest (the event that queues an email can come before
// ingest's Stored): the digest is made from the source, not from a read of
// the body.
func TestSourceThatComesDuringTheStoreReadIsUsed(t *testing.T) {
	t.Parallel()
	s, _, rc, acc := freshServices(t)
	raw := []byte("From: a@example.com\r\nTo: b@example.com\r\nSubject: late\r\n\r\nthe word capybara\r\n")
	late := ingest.New(rc, time.Now, ingest.Config{})
	emails, err := late.Deliver(context.Background(), raw, ingest.Envelope{Sender: "a@example.com",
		Recipients: []ingest.Recipient{{Address: "b@example.com", Account: acc}}})
	if err != nil {
		t.Fatal(err)
	}
	rc.onGetCheck = func() { s.Fresh(raw, emails) }
	s.idx.Put(emails[0])
	s.queue(acc.ID, emails[0].ID)
	run(t, s)
	waitDigest(t, s, acc.ID, emails[0].ID)
	if got, err := s.IDs(context.Background(), store.ListQuery{AccountID: acc.ID}, mustParse(t, "capybara")); err != nil || len(got) != 1 {
		t.Errorf("search for the body word: %v, %v; want the email", got, err)
	}
	if n := rc.bodies.Load(); n != 0 {
		t.Errorf("the digest read %d bodies from the store, want none", n)
	}
}

func ids(emails []*store.Email) []string {
	out := make([]string, len(emails))
	for i, e := range emails {
		out[i] = e.ID
	}
	return out
}

func equalSets(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestFreshKeepsWithinItsBounds(t *testing.T) {
	t.Parallel()
	s := NewService(nil, Config{})
	e := func(id string) []*store.Email { return []*store.Email{{AccountID: "acme-id", ID: id}} }
	s.Fresh(make([]byte, freshMax+1), e("large"))
	if len(s.fresh) != 0 {
		t.Errorf("a source of %d bytes was kept, over freshMax", freshMax+1)
	}
	one := make([]byte, freshMax)
	n := 0
	for s.freshBytes+freshMax <= freshBudget {
		s.Fresh(one, e(string(rune('a'+n))))
		n++
	}
	s.Fresh(one, e("over"))
	if s.freshBytes > freshBudget || len(s.fresh) != n {
		t.Errorf("%d sources of %d bytes kept, want %d within %d", len(s.fresh), s.freshBytes, n, freshBudget)
	}
	s.dropStaleFresh(time.Now().Add(freshAge + time.Second))
	if s.freshBytes != 0 || len(s.fresh) != 0 {
		t.Errorf("%d sources of %d bytes kept past freshAge", len(s.fresh), s.freshBytes)
	}
}

// TestRecipientsOfOneMessageShareItsDigest delivers one message to three
// recipients: its source is kept once, its digest made once, and the three
// emails share it in the index.
func TestRecipientsOfOneMessageShareItsDigest(t *testing.T) {
	t.Parallel()
	s, ing, rc, acc := freshServices(t)
	raw := []byte("From: a@example.com\r\nTo: b@example.com\r\nSubject: shared\r\n\r\nthe word axolotl\r\n")
	var rcpts []ingest.Recipient
	for _, a := range []string{"b@example.com", "c@example.com", "d@example.com"} {
		rcpts = append(rcpts, ingest.Recipient{Address: a, Account: acc})
	}
	emails, err := ing.Deliver(context.Background(), raw, ingest.Envelope{Sender: "a@example.com", Recipients: rcpts})
	if err != nil {
		t.Fatal(err)
	}
	if s.freshBytes != int64(len(raw)) || len(s.fresh) != 3 {
		t.Errorf("kept %d bytes for %d emails, want the source's %d once for 3", s.freshBytes, len(s.fresh), len(raw))
	}
	for _, e := range emails {
		s.idx.Put(e)
		s.queue(e.AccountID, e.ID)
	}
	run(t, s)
	for _, e := range emails {
		waitDigest(t, s, acc.ID, e.ID)
	}
	first := digestSlotOf(s.idx, acc.ID, emails[0].ID)
	for _, e := range emails[1:] {
		if g := digestSlotOf(s.idx, acc.ID, e.ID); g != first {
			t.Errorf("the digest of %s is a copy of its fellow recipient's (slot %d, not %d), want the same one", e.ID, g, first)
		}
	}
	if got, err := s.IDs(context.Background(), store.ListQuery{AccountID: acc.ID}, mustParse(t, "axolotl")); err != nil || len(got) != 3 {
		t.Errorf("search for the body word: %v, %v; want the three emails", got, err)
	}
	if n := rc.bodies.Load(); n != 0 {
		t.Errorf("the digests read %d bodies from the store, want none", n)
	}
	nothingKept(t, s)
}

// TestBacklogLargerThanTheQueueIsDigested stores more emails than the
// digest queue holds and than a sweep takes, with no tick of the sweep's
// timer in the test's time: every email gets its digest all the same, the
// worker sweeping again whenever the queue runs dry.
func TestBacklogLargerThanTheQueueIsDigested(t *testing.T) {
	t.Parallel()
	s, _, rc, acc := freshServices(t)
	s.work = make(chan key, 10)
	s.sweepLimit = 25
	s.sweepEvery = time.Hour
	plain := ingest.New(rc, time.Now, ingest.Config{})
	const n = 200
	var emails []*store.Email
	for i := range n {
		raw := fmt.Appendf(nil, "From: a@example.com\r\nTo: b@example.com\r\nSubject: backlog %d\r\n\r\nword%d\r\n", i, i)
		got, err := plain.Deliver(context.Background(), raw, ingest.Envelope{Sender: "a@example.com",
			Recipients: []ingest.Recipient{{Address: "b@example.com", Account: acc}}})
		if err != nil {
			t.Fatal(err)
		}
		emails = append(emails, got...)
	}
	run(t, s)
	for _, e := range emails {
		waitDigest(t, s, acc.ID, e.ID)
	}
}

// TestFallingBehindCatchesUpFromTheHistory holds the index's follower up
// while 300 emails arrive, more than a subscription may have undelivered:
// the subscription is dropped, and the follower takes the missed events
// from the store's history rather than reading the whole account again.
func TestFallingBehindCatchesUpFromTheHistory(t *testing.T) {
	t.Parallel()
	s, _, lc, acc := freshSetup(t)
	ctx := context.Background()
	if err := s.ready(ctx, acc.ID); err != nil {
		t.Fatal(err)
	}
	lists := lc.lists.Load()
	state := s.state(acc.ID)
	state.mu.Lock() // the follower waits for it before each event
	ing := ingest.New(lc, time.Now, ingest.Config{})
	var emails []*store.Email
	for i := range 300 {
		raw := fmt.Appendf(nil, "From: a@example.com\r\nTo: b@example.com\r\nSubject: burst %d\r\n\r\nburst\r\n", i)
		got, err := ing.Deliver(ctx, raw, ingest.Envelope{Sender: "a@example.com",
			Recipients: []ingest.Recipient{{Address: "b@example.com", Account: acc}}})
		if err != nil {
			state.mu.Unlock()
			t.Fatal(err)
		}
		emails = append(emails, got...)
	}
	state.mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for _, e := range emails {
		for has, _ := s.idx.Has(acc.ID, e.ID); !has; has, _ = s.idx.Has(acc.ID, e.ID) {
			if time.Now().After(deadline) {
				t.Fatalf("email %s is not in the index 20s after the burst", e.ID)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if n := lc.lists.Load() - lists; n != 0 {
		t.Errorf("the follower listed the account %d times to catch up, want none (the history has the events)", n)
	}
}

// digestSlotOf returns the slot of the digest the index holds for the
// email: emails that share a digest share its slot.
func digestSlotOf(x *Index, accountID, id string) uint32 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	a := x.accounts[accountID]
	sl, _ := a.slot(id)
	return a.recs[sl].digest
}
