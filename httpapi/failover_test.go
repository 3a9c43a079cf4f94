package httpapi_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/eventhub"
	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/store"
)

// flakyStore answers Unavailable to its first failures list queries, as a
// store does during a Redis failover, and is the embedded store otherwise.
type flakyStore struct {
	store.Store
	failures atomic.Int32
}

func (f *flakyStore) ListEmails(ctx context.Context, q store.ListQuery) ([]*store.Email, error) {
	if f.failures.Add(-1) >= 0 {
		return nil, store.Errorf(store.Unavailable, "failing over")
	}
	return f.Store.ListEmails(ctx, q)
}

// TestWaitRidesThroughUnavailableStore holds a list request with wait while
// the store fails its first two queries: the failures are temporary until
// the wait's deadline, so the request still answers the email that arrives
// afterwards, and a wait whose deadline passes while the store still fails
// answers 503.
func TestWaitRidesThroughUnavailableStore(t *testing.T) {
	t.Parallel()
	var flaky *flakyStore
	b := testenv.Backend{Name: "flaky", Open: func(t *testing.T) store.Store {
		st := testenv.OpenEmbedded(t)
		flaky = &flakyStore{Store: st}
		flaky.failures.Store(2)
		return flaky
	}}
	e := testenv.Start(t, b, nil)

	done := make(chan *testenv.Response, 1)
	go func() { done <- get(t, e, "/v1/emails?wait=30&recipient=late%40acme.test", acme) }()
	testenv.WaitFor(t, 10*time.Second, "both failed queries and a good one", func() bool { return flaky.failures.Load() < 0 })
	select {
	case r := <-done:
		t.Fatalf("answered %d %s before any email, want it held", r.Status, r.Body)
	default:
	}
	want := create(t, e, acme, map[string]any{"recipient": "late@acme.test", "sender": "s@example.com"})
	r := <-done
	if r.Status != http.StatusOK {
		t.Fatalf("status %d %s, want 200", r.Status, r.Body)
	}
	if items := r.JSON(t)["items"].([]any); len(items) != 1 || items[0].(map[string]any)["id"] != want["id"] {
		t.Errorf("items %v, want the email %v", items, want["id"])
	}

	flaky.failures.Store(1 << 20)
	start := time.Now()
	if r := get(t, e, "/v1/emails?wait=1&recipient=late%40acme.test", acme); r.Status != http.StatusServiceUnavailable {
		t.Errorf("a wait that ends with the store still failing: %d %s, want 503", r.Status, r.Body)
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Errorf("the failing wait answered after %v, want at its 1s deadline", took)
	}
}

// silentStore is the embedded store whose events never reach a subscriber,
// as when a Redis failover silences them. It counts the list queries for
// silent@acme.test that have returned.
type silentStore struct {
	store.Store
	hub     *eventhub.Hub // nothing publishes into it
	queries atomic.Int32
}

func (s *silentStore) ListEmails(ctx context.Context, q store.ListQuery) ([]*store.Email, error) {
	if q.Recipient == "silent@acme.test" {
		defer s.queries.Add(1)
	}
	return s.Store.ListEmails(ctx, q)
}

func (s *silentStore) Subscribe(accountID string) store.Subscription {
	return s.hub.Subscribe(accountID)
}

func (s *silentStore) EventsAfter(_ context.Context, accountID, afterID string) ([]store.Event, bool, error) {
	return s.hub.After(accountID, afterID)
}

// TestWaitAnswersEmailWithoutEvent holds a list request with wait, then
// stores its email without an event reaching the request: at its deadline
// the request queries once more and answers the email.
func TestWaitAnswersEmailWithoutEvent(t *testing.T) {
	t.Parallel()
	silent := &silentStore{hub: eventhub.New(-1)}
	b := testenv.Backend{Name: "silent", Open: func(t *testing.T) store.Store {
		silent.Store = testenv.OpenEmbedded(t)
		return silent
	}}
	e := testenv.Start(t, b, nil)
	done := make(chan *testenv.Response, 1)
	start := time.Now()
	go func() { done <- get(t, e, "/v1/emails?wait=2&recipient=silent%40acme.test", acme) }()
	testenv.WaitFor(t, 10*time.Second, "the request's first query", func() bool { return silent.queries.Load() == 1 })
	want := create(t, e, acme, map[string]any{"recipient": "silent@acme.test", "sender": "s@example.com"})
	r := <-done
	if r.Status != http.StatusOK {
		t.Fatalf("status %d %s, want 200", r.Status, r.Body)
	}
	if items := r.JSON(t)["items"].([]any); len(items) != 1 || items[0].(map[string]any)["id"] != want["id"] {
		t.Errorf("items %v, want the email %v stored before the deadline", items, want["id"])
	}
	if took := time.Since(start); took < 1900*time.Millisecond {
		t.Errorf("answered after %v, want at the 2s deadline (no event came)", took)
	}
}
