package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/mailsink/mailsink/store"
)

// testConcurrentCreates creates 8×50 emails from 8 goroutines and checks that
// all of them are listed exactly once, in order.
func testConcurrentCreates(t *testing.T, s Store) {
	const (
		workers = 8
		each    = 50
	)
	emails := make([]*store.Email, workers*each)
	for n := range emails {
		// Many share a millisecond, and time order is not id order.
		emails[n] = newEmail(acctA, n, withReceivedAt(at(int64(n%37))), withStatus([]store.Status{
			store.StatusReceived, store.StatusProcessed, store.StatusArchived,
		}[n%3]))
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n := w*each + i
				if err := s.CreateEmails(context.Background(), newBody(n), emails[n:n+1]); err != nil {
					errs <- fmt.Errorf("CreateEmails(%s): %w", emails[n].ID, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	want := slices.Clone(emails)
	sortListOrder(want)
	var got []*store.Email
	for offset := int64(0); ; offset += 100 {
		page := list(t, s, store.ListQuery{AccountID: acctA, Limit: 100, Offset: offset})
		got = append(got, page...)
		if len(page) < 100 {
			break
		}
	}
	if !equalIDs(ids(got), ids(want)) {
		t.Fatalf("ListEmails after concurrent creates: got %d emails, want %d\ngot  %v\nwant %v", len(got), len(want), ids(got), ids(want))
	}
	for i := range got {
		if d := diffEmail(got[i], want[i]); d != "" {
			t.Errorf("email %s:%s", want[i].ID, d)
		}
	}
	for _, st := range []store.Status{store.StatusReceived, store.StatusProcessed, store.StatusArchived} {
		var n int
		for offset := int64(0); ; offset += 100 {
			page := list(t, s, store.ListQuery{AccountID: acctA, Status: st, Limit: 100, Offset: offset})
			n += len(page)
			if len(page) < 100 {
				break
			}
		}
		if want := len(expect(emails, store.ListQuery{AccountID: acctA, Status: st, Limit: len(emails)})); n != want {
			t.Errorf("ListEmails(status=%s) after concurrent creates: %d emails, want %d", st, n, want)
		}
	}
	checkBodyCount(t, s, len(emails), "after concurrent creates")
}

// testConcurrentUpdates updates one email from four goroutines, each owning
// one field, while another reads it. No update may be lost: at the end each
// field holds its writer's last value, and the email is listed once, under
// its final status only.
func testConcurrentUpdates(t *testing.T, s Store) {
	const rounds = 25
	ctx := context.Background()
	e := newEmail(acctA, 1)
	create(t, s, e)
	statuses := []store.Status{store.StatusProcessed, store.StatusArchived, store.StatusReceived}
	updatedAt := at(10_000)
	updates := []func(i int) store.Update{
		func(i int) store.Update {
			return store.Update{Labels: &[]string{fmt.Sprintf("l%d", i)}, UpdatedAt: updatedAt}
		},
		func(i int) store.Update {
			return store.Update{Notes: &store.Nullable{Value: ptr(fmt.Sprintf("n%d", i))}, UpdatedAt: updatedAt}
		},
		func(i int) store.Update { return store.Update{Status: &statuses[i%3], UpdatedAt: updatedAt} },
		func(i int) store.Update {
			return store.Update{Subject: &store.Nullable{Value: ptr(fmt.Sprintf("s%d", i))}, UpdatedAt: updatedAt}
		},
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(updates)+1)
	for _, u := range updates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				if _, err := s.UpdateEmail(ctx, acctA, e.ID, u(i)); err != nil {
					errs <- fmt.Errorf("UpdateEmail: %w", err)
					return
				}
			}
		}()
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			got, err := s.GetEmail(ctx, acctA, e.ID)
			if err != nil {
				errs <- fmt.Errorf("GetEmail during updates: %w", err)
				return
			}
			if got.ID != e.ID || got.Sender != e.Sender || got.Labels == nil || !got.Status.Valid() {
				errs <- fmt.Errorf("GetEmail during updates returned a corrupt email: %+v", got)
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	want := *e
	last := rounds - 1
	want.Labels = []string{fmt.Sprintf("l%d", last)}
	want.Notes = ptr(fmt.Sprintf("n%d", last))
	want.Status = statuses[last%3]
	want.Subject = ptr(fmt.Sprintf("s%d", last))
	want.UpdatedAt = updatedAt
	if d := diffEmail(mustGet(t, s, acctA, e.ID), &want); d != "" {
		t.Errorf("GetEmail after concurrent updates:%s", d)
	}
	for _, st := range []store.Status{store.StatusReceived, store.StatusProcessed, store.StatusArchived} {
		got := listIDs(t, s, store.ListQuery{AccountID: acctA, Status: st, Limit: 100})
		var want []string
		if st == statuses[last%3] {
			want = []string{e.ID}
		}
		if !equalIDs(got, want) {
			t.Errorf("ListEmails(status=%s) after concurrent updates: got %v, want %v", st, got, want)
		}
	}
	if got := listIDs(t, s, store.ListQuery{AccountID: acctA, Limit: 100}); !equalIDs(got, []string{e.ID}) {
		t.Errorf("ListEmails after concurrent updates: got %v, want [%s]", got, e.ID)
	}
}

// testConcurrentDeletes deletes each of three emails sharing one body from
// four goroutines at once: exactly one delete of each succeeds, the others
// answer NotFound, and the body goes with the last email.
func testConcurrentDeletes(t *testing.T, s Store) {
	const perEmail = 4
	ctx := context.Background()
	emails := []*store.Email{
		newEmail(acctA, 1, withRecipient("a@example.com")),
		newEmail(acctA, 2, withRecipient("b@example.com")),
		newEmail(acctA, 3, withRecipient("c@example.com")),
	}
	if err := s.CreateEmails(ctx, newBody(1), emails); err != nil {
		t.Fatalf("CreateEmails: %v", err)
	}
	results := make([]chan error, len(emails))
	var wg sync.WaitGroup
	for i, e := range emails {
		results[i] = make(chan error, perEmail)
		for range perEmail {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] <- s.DeleteEmail(ctx, acctA, e.ID)
			}()
		}
	}
	wg.Wait()
	for i, e := range emails {
		close(results[i])
		var ok int
		for err := range results[i] {
			switch {
			case err == nil:
				ok++
			case !store.IsCode(err, store.NotFound):
				t.Errorf("DeleteEmail(%s): got %v, want nil or NotFound", e.ID, err)
			}
		}
		if ok != 1 {
			t.Errorf("DeleteEmail(%s) from %d goroutines: %d succeeded, want 1", e.ID, perEmail, ok)
		}
	}
	if got := listIDs(t, s, store.ListQuery{AccountID: acctA, Limit: 100}); len(got) != 0 {
		t.Errorf("ListEmails after deleting everything: got %v, want none", got)
	}
	checkBodyCount(t, s, 0, "after concurrent deletes of every email sharing a body")
}
