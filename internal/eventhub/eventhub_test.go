package eventhub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
)

// TestConcurrentPublishesArriveInIDOrder publishes from many goroutines and
// checks that a subscriber sees strictly increasing ids: ids are assigned
// and delivered under one lock.
func TestConcurrentPublishesArriveInIDOrder(t *testing.T) {
	h := New(0)
	sub := h.Subscribe("a")
	const writers, each = 8, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				h.Publish(store.Event{Type: store.EmailUpdated, AccountID: "a", EmailID: fmt.Sprint(w, "-", i)})
			}
		}()
	}
	wg.Wait()
	var last ID
	for n := range writers * each {
		e := <-sub.Events()
		id, err := ParseID(e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 && !last.Less(id) {
			t.Fatalf("event %d: id %s after %s", n, id, last)
		}
		last = id
	}
}

// TestAfterKnowsWhatItCannotKnow checks that an id from before the Hub
// started (an earlier process) and an id that fell out of the history both
// report the replay as incomplete, and that recent ids replay completely.
func TestAfterKnowsWhatItCannotKnow(t *testing.T) {
	ms := int64(1_800_000_000_000)
	clock := func() int64 { return ms }
	old := newHub(0, clock)
	old.Publish(store.Event{AccountID: "a", EmailID: "1"})
	before, _, _ := old.After("a", "0-0")
	ms += 1000 // the process restarts a second later
	h := newHub(3, clock)
	if _, complete, err := h.After("a", before[0].ID); err != nil || complete {
		t.Errorf("after an id of an earlier hub: complete %v, err %v; want incomplete", complete, err)
	}
	for i := range 5 {
		h.Publish(store.Event{AccountID: "a", EmailID: fmt.Sprint(i)})
	}
	all, _, _ := h.After("a", "0-0")
	if len(all) != 3 {
		t.Fatalf("kept %d events, want 3", len(all))
	}
	if _, complete, _ := h.After("a", all[0].ID); !complete {
		t.Error("after the oldest kept event: incomplete")
	}
	first := New(0)
	first.Publish(store.Event{AccountID: "a"})
	firstEvents, _, _ := first.After("a", "0-0")
	if _, complete, _ := first.After("a", firstEvents[0].ID); !complete {
		t.Error("after this hub's first event: incomplete")
	}
	if _, _, err := h.After("a", "x"); !store.IsCode(err, store.Invalid) {
		t.Errorf("bad id: %v", err)
	}
}

func TestDropAllEndsSubscriptions(t *testing.T) {
	h := New(0)
	a, b := h.Subscribe("a"), h.Subscribe("b")
	h.DropAll()
	for _, s := range []store.Subscription{a, b} {
		if _, open := <-s.Events(); open {
			t.Error("a subscription is open after DropAll")
		}
		s.Close() // harmless after the drop
	}
	c := h.Subscribe("a")
	h.Publish(store.Event{AccountID: "a"})
	if e := <-c.Events(); e.ID == "" {
		t.Error("a new subscription got no event after DropAll")
	}
}

// TestSubscribed checks that only an open subscription of the account
// counts: not the history a Hub keeps (which Wants counts), not another
// account's subscriber, not a closed one.
func TestSubscribed(t *testing.T) {
	h := New(0)
	if h.Subscribed("a") {
		t.Fatal("Subscribed before any subscription")
	}
	b := h.Subscribe("b")
	defer b.Close()
	if h.Subscribed("a") {
		t.Fatal("Subscribed(a) with only b subscribed")
	}
	a := h.Subscribe("a")
	if !h.Subscribed("a") {
		t.Fatal("not Subscribed(a) with a subscription of a open")
	}
	a.Close()
	if h.Subscribed("a") {
		t.Fatal("Subscribed(a) after its one subscription closed")
	}
}

// TestPublishInOrder publishes numbered events out of order and checks they
// arrive by number, an event waiting for its predecessors.
func TestPublishInOrder(t *testing.T) {
	h := New(0)
	h.StartSequence(10)
	sub := h.Subscribe("a")
	h.PublishInOrder(12, store.Event{AccountID: "a", EmailID: "12"})
	h.PublishInOrder(11, store.Event{AccountID: "a", EmailID: "11"})
	select {
	case e := <-sub.Events():
		t.Fatalf("got %s before event 10", e.EmailID)
	default:
	}
	h.PublishInOrder(10, store.Event{AccountID: "a", EmailID: "10"})
	for _, want := range []string{"10", "11", "12"} {
		if e := <-sub.Events(); e.EmailID != want {
			t.Fatalf("got %s, want %s", e.EmailID, want)
		}
	}
	h.PublishInOrder(13, store.Event{AccountID: "a", EmailID: "13"})
	if e := <-sub.Events(); e.EmailID != "13" {
		t.Fatalf("got %s, want 13", e.EmailID)
	}
}

// TestSkipInOrder: a number whose change failed does not hold back the
// events numbered after it, and publishes nothing.
func TestSkipInOrder(t *testing.T) {
	h := New(0)
	h.StartSequence(1)
	sub := h.Subscribe("a")
	h.PublishInOrder(2, store.Event{AccountID: "a", EmailID: "2"})
	h.SkipInOrder(1)
	if e := <-sub.Events(); e.EmailID != "2" {
		t.Fatalf("got %q, want event 2 once 1 is skipped", e.EmailID)
	}
	if err := h.WaitSequence(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-sub.Events():
		t.Fatalf("got %q after the skipped number's event", e.EmailID)
	default:
	}
}

// TestIDsRevealNoOtherAccount checks that an account's event ids count its
// own events only: a subscriber must not learn another account's volume
// from the gaps between its ids.
func TestIDsRevealNoOtherAccount(t *testing.T) {
	ms := int64(1_800_000_000_000)
	h := newHub(0, func() int64 { return ms })
	h.Publish(store.Event{AccountID: "b", EmailID: "b0"})
	for i := range 100 {
		h.Publish(store.Event{AccountID: "a", EmailID: fmt.Sprint(i)})
	}
	h.Publish(store.Event{AccountID: "b", EmailID: "b1"})
	got, _, _ := h.After("b", "0-0")
	var ids []string
	for _, e := range got {
		ids = append(ids, e.ID)
	}
	if want := []string{"1800000000000-0", "1800000000000-1"}; !slices.Equal(ids, want) {
		t.Errorf("account b's ids = %v, want %v whatever account a published", ids, want)
	}
}

// TestWaitSequence: a reader waiting for number 2 is held while 1 is
// missing, released once 1 and 2 are out, and released by Close or its
// context otherwise.
func TestWaitSequence(t *testing.T) {
	h := New(0)
	h.StartSequence(1)
	ev := func(id string) store.Event { return store.Event{Type: store.EmailCreated, AccountID: "a", EmailID: id} }
	h.PublishInOrder(2, ev("2"))
	done := make(chan error, 1)
	go func() { done <- h.WaitSequence(context.Background(), 2) }()
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := h.WaitSequence(short, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitSequence(2) with 1 missing: %v, want it to wait until its context ends", err)
	}
	select {
	case err := <-done:
		t.Fatalf("WaitSequence(2) returned %v before 1 was published", err)
	default:
	}
	h.PublishInOrder(1, ev("1"))
	if err := <-done; err != nil {
		t.Fatalf("WaitSequence(2) once 1 and 2 are out: %v", err)
	}
	if err := h.WaitSequence(context.Background(), 1); err != nil {
		t.Fatalf("WaitSequence(1), already out: %v", err)
	}
	go func() { done <- h.WaitSequence(context.Background(), 10) }()
	h.Close()
	if err := <-done; err != nil {
		t.Fatalf("WaitSequence on a closed Hub: %v", err)
	}
}
