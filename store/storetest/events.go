package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
)

// testEvents checks a store.Notifier: every create, update and delete of an
// account reaches its subscribers in order, with the email after the change,
// and not those of another account; EventsAfter replays what followed an id.
func testEvents(t *testing.T, s store.Store) {
	n, ok := s.(store.Notifier)
	if !ok {
		t.Skip("the store does not implement store.Notifier")
	}
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
