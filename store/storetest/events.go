package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/eventhub"
	"github.com/mailsink/mailsink/store"
)

// testEvents checks a store.Events: every create, update and delete of an
// account reaches its subscribers in order, with the email after the change,
// and not those of another account; EventsAfter replays what followed an id.
func testEvents(t *testing.T, s Store) {
	n := s
	ctx := context.Background()
	sub := n.Subscribe("acct-ev")
	defer sub.Close()
	other := n.Subscribe("acct-ev-other")
	defer other.Close()

	e := newEmail("acct-ev", 1)
	create(t, s, e)
	if _, err := s.UpdateEmail(ctx, "acct-ev", e.ID, store.Update{Status: ptr(store.StatusProcessed), UpdatedAt: at(5000)}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteEmail(ctx, "acct-ev", e.ID); err != nil {
		t.Fatal(err)
	}

	var got []store.Event
	for _, want := range []store.EventType{store.EmailCreated, store.EmailUpdated, store.EmailDeleted} {
		ev := next(t, sub)
		if ev.Type != want || ev.EmailID != e.ID || ev.AccountID != "acct-ev" || ev.ID == "" {
			t.Fatalf("event %+v, want %s of %s", ev, want, e.ID)
		}
		got = append(got, ev)
	}
	if got[0].Email == nil || got[0].Email.Recipient != e.Recipient {
		t.Errorf("created event carries %+v, want the email", got[0].Email)
	}
	if got[1].Email == nil || got[1].Email.Status != store.StatusProcessed {
		t.Errorf("updated event carries %+v, want the updated email", got[1].Email)
	}
	if got[2].Email != nil {
		t.Errorf("deleted event carries %+v, want nil", got[2].Email)
	}
	select {
	case ev := <-other.Events():
		t.Errorf("the other account got %+v", ev)
	default:
	}

	after, complete, err := n.EventsAfter(ctx, "acct-ev", got[0].ID)
	if err != nil || !complete {
		t.Fatalf("EventsAfter: %v, complete %v", err, complete)
	}
	if len(after) != 2 || after[0].ID != got[1].ID || after[1].ID != got[2].ID || after[0].Type != store.EmailUpdated {
		t.Errorf("EventsAfter(first) = %+v, want the update and the delete", after)
	}
	if _, _, err := n.EventsAfter(ctx, "acct-ev", "not-an-id"); !store.IsCode(err, store.Invalid) {
		t.Errorf("EventsAfter(bad id) = %v, want Invalid", err)
	}

	sub.Close()
	if _, open := <-sub.Events(); open {
		t.Error("the channel is open after Close")
	}
}

func next(t *testing.T, sub store.Subscription) store.Event {
	t.Helper()
	select {
	case ev, ok := <-sub.Events():
		if !ok {
			t.Fatal("subscription ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return store.Event{}
}

// testEventsInCommitOrder updates one email from several goroutines and
// checks that subscribers see the events in commit order: ids strictly
// increasing, and the last event carrying the state the store kept.
func testEventsInCommitOrder(t *testing.T, s Store) {
	n := s
	ctx := context.Background()
	e := newEmail("acct-order", 1)
	create(t, s, e)
	sub := n.Subscribe("acct-order")
	defer sub.Close()
	const writers, each = 4, 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				notes := fmt.Sprintf("writer %d update %d", w, i)
				if _, err := s.UpdateEmail(ctx, "acct-order", e.ID, store.Update{Notes: &store.Nullable{Value: &notes}}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	final, err := s.GetEmail(ctx, "acct-order", e.ID)
	if err != nil {
		t.Fatal(err)
	}
	var last store.Event
	for i := 0; i < writers*each; {
		ev := next(t, sub)
		if last.ID != "" && !idLess(t, last.ID, ev.ID) {
			t.Fatalf("event %d: id %s after %s", i, ev.ID, last.ID)
		}
		last = ev
		if ev.Type == store.EmailUpdated {
			i++ // the create's event may arrive after Subscribe on a shared backend
		}
	}
	if last.Email == nil || final.Notes == nil || *last.Email.Notes != *final.Notes {
		t.Errorf("the last event (%s) carries notes %q, the store kept %q", last.ID, showNotes(last.Email), *final.Notes)
	}
}

// testEventsAfterLongGap replays more events than one page of the history:
// a resume from a kept event must return every event after it.
func testEventsAfterLongGap(t *testing.T, s Store) {
	n := s
	ctx := context.Background()
	e := newEmail("acct-long", 1)
	sub := n.Subscribe("acct-long")
	defer sub.Close()
	const updates = 1100
	// The subscriber reads while the writes go on, as an event stream
	// does: one that falls far behind is dropped. The writer waits for it
	// every 100 updates, since a store in memory writes faster than any
	// reader across the network would.
	collected := make(chan []string, 1)
	var got atomic.Int64
	go func() {
		var ids []string
		for ev := range sub.Events() {
			got.Add(1)
			if ids = append(ids, ev.ID); len(ids) == updates+1 {
				break
			}
		}
		collected <- ids
	}()
	create(t, s, e)
	for i := range updates {
		if i%100 == 0 {
			waitFor(t, func() bool { return got.Load() >= int64(i) })
		}
		notes := fmt.Sprint(i)
		if _, err := s.UpdateEmail(ctx, "acct-long", e.ID, store.Update{Notes: &store.Nullable{Value: &notes}}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	select {
	case ids = <-collected:
	case <-time.After(30 * time.Second):
		t.Fatal("the events did not all arrive within 30s")
	}
	if len(ids) != updates+1 {
		t.Fatalf("the subscription got %d of %d events", len(ids), updates+1)
	}
	for _, from := range []int{90, 1000} {
		got, complete, err := n.EventsAfter(ctx, "acct-long", ids[from])
		if err != nil {
			t.Fatal(err)
		}
		if from == 1000 && !complete {
			t.Errorf("after event %d of %d: incomplete", from, len(ids))
		}
		if complete && len(got) != len(ids)-from-1 {
			t.Errorf("after event %d of %d: %d events and complete, want %d", from, len(ids), len(got), len(ids)-from-1)
		}
		if len(got) > 0 && got[len(got)-1].ID != ids[len(ids)-1] {
			t.Errorf("after event %d: the replay ends at %s, want %s", from, got[len(got)-1].ID, ids[len(ids)-1])
		}
	}
}

// waitFor polls until cond holds, for at most 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("the condition did not hold within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// idLess reports whether event id a comes before b.
func idLess(t *testing.T, a, b string) bool {
	t.Helper()
	ia, errA := eventhub.ParseID(a)
	ib, errB := eventhub.ParseID(b)
	if errA != nil || errB != nil {
		t.Fatalf("event ids %q, %q: %v %v", a, b, errA, errB)
	}
	return ia.Less(ib)
}

func showNotes(e *store.Email) string {
	if e == nil || e.Notes == nil {
		return "<none>"
	}
	return *e.Notes
}
