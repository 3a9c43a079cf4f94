package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
)

// wantStats fails the test unless the account's totals are emails and
// rawBytes. It does nothing for a store without store.Stats.
func wantStats(t *testing.T, s Store, accountID string, emails, rawBytes int64, when string) {
	t.Helper()
	st := s
	n, b, err := st.AccountStats(context.Background(), accountID)
	if err != nil {
		t.Fatalf("%s: AccountStats(%s): %v", when, accountID, err)
	}
	if n != emails || b != rawBytes {
		t.Errorf("%s: AccountStats(%s) = %d emails, %d bytes; want %d, %d", when, accountID, n, b, emails, rawBytes)
	}
}

// testStats checks a store.Stats: every create and delete changes the
// account's totals exactly once, updates and refused writes do not, and
// accounts are counted apart.
func testStats(t *testing.T, s Store) {
	ctx := context.Background()
	wantStats(t, s, acctA, 0, 0, "empty store")

	// Two recipients of one message share a body; each counts its RawSize.
	a1 := newEmail(acctA, 1, func(e *store.Email) { e.RawSize = 1000 })
	a2 := newEmail(acctA, 2, func(e *store.Email) { e.RawSize = 1000 })
	if err := s.CreateEmails(ctx, newBody(1), []*store.Email{a1, a2}); err != nil {
		t.Fatal(err)
	}
	a3 := newEmail(acctA, 3, func(e *store.Email) { e.RawSize = 1 << 40 })
	b1 := newEmail(acctB, 4, func(e *store.Email) { e.RawSize = 7 })
	create(t, s, a3, b1)
	wantStats(t, s, acctA, 3, 2000+1<<40, "after 3 creates")
	wantStats(t, s, acctB, 1, 7, "the other account")

	// A refused create and an update change nothing.
	dup := newEmail(acctA, 5, func(e *store.Email) { e.RawSize = 50 })
	err := s.CreateEmails(ctx, newBody(5), []*store.Email{dup, newEmail(acctA, 1)})
	wantCode(t, err, store.Conflict, "CreateEmails with a stored id")
	if _, err := s.UpdateEmail(ctx, acctA, a1.ID, store.Update{Status: ptr(store.StatusArchived), Labels: &[]string{"x"}}); err != nil {
		t.Fatal(err)
	}
	wantStats(t, s, acctA, 3, 2000+1<<40, "after a refused create and an update")

	if err := s.DeleteEmail(ctx, acctA, a3.ID); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.DeleteEmail(ctx, acctA, a3.ID), store.NotFound, "DeleteEmail twice")
	wantCode(t, s.DeleteEmail(ctx, acctB, a1.ID), store.NotFound, "DeleteEmail from another account")
	wantStats(t, s, acctA, 2, 2000, "after a delete")
	for _, e := range []*store.Email{a1, a2} {
		if err := s.DeleteEmail(ctx, acctA, e.ID); err != nil {
			t.Fatal(err)
		}
	}
	wantStats(t, s, acctA, 0, 0, "after deleting every email")
	wantStats(t, s, acctB, 1, 7, "the other account at the end")
	create(t, s, newEmail(acctA, 6, func(e *store.Email) { e.RawSize = 3 }))
	wantStats(t, s, acctA, 1, 3, "after emptying and creating again")
}

// testStatsConcurrent checks the totals under concurrent creates, some of
// them racing for the same id, and concurrent deletes, some of the same
// email: each email that was stored counts once, and once deleted not at
// all.
func testStatsConcurrent(t *testing.T, s Store) {
	ctx := context.Background()
	const emails, racers = 40, 3
	var wg sync.WaitGroup
	errs := make(chan error, emails*racers*2)
	for i := range emails {
		for range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e := newEmail(acctA, i, func(e *store.Email) { e.RawSize = int64(100 + i) })
				err := s.CreateEmails(ctx, newBody(i), []*store.Email{e})
				if err != nil && !store.IsCode(err, store.Conflict) {
					errs <- fmt.Errorf("CreateEmails(%d): %w", i, err)
				}
			}()
		}
		// Another account's creates among them: a store that adds up the
		// totals of many creates at once keeps each account's apart.
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := newEmail(acctB, emails+i, func(e *store.Email) { e.RawSize = int64(1000 + i) })
			if err := s.CreateEmails(ctx, newBody(emails+i), []*store.Email{e}); err != nil {
				errs <- fmt.Errorf("CreateEmails(%s, %d): %w", acctB, i, err)
			}
		}()
	}
	wg.Wait()
	var sum, sumB int64
	for i := range emails {
		sum += int64(100 + i)
		sumB += int64(1000 + i)
	}
	wantStats(t, s, acctA, emails, sum, "after racing creates")
	wantStats(t, s, acctB, emails, sumB, "after racing creates of another account")

	for i := 0; i < emails; i += 2 {
		sum -= int64(100 + i)
		for range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := s.DeleteEmail(ctx, acctA, id(i))
				if err != nil && !store.IsCode(err, store.NotFound) {
					errs <- fmt.Errorf("DeleteEmail(%d): %w", i, err)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	wantStats(t, s, acctA, emails/2, sum, "after racing deletes of every other email")
}

// testOldestEmails checks a store.Pruner: the oldest emails first, ties on
// ReceivedAt broken by id, whole emails, keep leaving out the newest, and
// nothing of another account.
func testOldestEmails(t *testing.T, s Store) {
	p := s
	ctx := context.Background()
	oldest := func(accountID string, keep int64, limit int) []*store.Email {
		t.Helper()
		got, err := p.OldestEmails(ctx, accountID, keep, 0, limit)
		if err != nil {
			t.Fatalf("OldestEmails(%s, keep %d, limit %d): %v", accountID, keep, limit, err)
		}
		return got
	}
	if got := oldest(acctA, 0, 10); len(got) != 0 {
		t.Errorf("OldestEmails of an empty account: got %v", ids(got))
	}

	// Created out of order; 3, 4 and 5 share a millisecond, as do 6 and 1,
	// and 2 is received before 1970.
	emails := []*store.Email{
		newEmail(acctA, 5, withReceivedAt(at(1000)), withLabels("l")),
		newEmail(acctA, 1, withReceivedAt(at(2000)), withNotes("n")),
		newEmail(acctA, 3, withReceivedAt(at(1000)), withStatus(store.StatusArchived)),
		newEmail(acctA, 6, withReceivedAt(at(2000))),
		newEmail(acctA, 4, withReceivedAt(at(1000)), withNoSubject()),
		newEmail(acctA, 2, withReceivedAt(time.UnixMilli(-5000).UTC())),
		newEmail(acctA, 7, withReceivedAt(at(3000))),
	}
	create(t, s, emails...)
	create(t, s, newEmail(acctB, 8, withReceivedAt(time.UnixMilli(-9000).UTC())))
	order := idsOf(2, 3, 4, 5, 1, 6, 7)

	got := oldest(acctA, 0, 100)
	if !slices.Equal(ids(got), order) {
		t.Fatalf("OldestEmails(limit 100) = %v, want %v", ids(got), order)
	}
	byID := map[string]*store.Email{}
	for _, e := range emails {
		byID[e.ID] = e
	}
	for _, e := range got {
		if d := diffEmail(e, byID[e.ID]); d != "" {
			t.Errorf("OldestEmails: email %s:%s", e.ID, d)
		}
	}

	tests := []struct {
		keep  int64
		limit int
		want  []string
	}{
		{0, 1, order[:1]},
		{0, 3, order[:3]},
		{0, 7, order},
		{1, 100, order[:6]},
		{5, 100, order[:2]},
		{2, 3, order[:3]},
		{6, 3, order[:1]},
		{7, 100, nil},
		{1000, 100, nil},
	}
	for _, tt := range tests {
		if got := ids(oldest(acctA, tt.keep, tt.limit)); !equalIDs(got, tt.want) {
			t.Errorf("OldestEmails(keep %d, limit %d) = %v, want %v", tt.keep, tt.limit, got, tt.want)
		}
	}
	for _, tt := range []struct {
		keep, skip int64
		limit      int
		want       []string
	}{
		{0, 2, 2, order[2:4]},
		{0, 6, 100, order[6:]},
		{0, 7, 100, nil},
		{2, 2, 100, order[2:5]},
		{5, 2, 100, nil},
	} {
		got, err := p.OldestEmails(ctx, acctA, tt.keep, tt.skip, tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		if !equalIDs(ids(got), tt.want) {
			t.Errorf("OldestEmails(keep %d, skip %d, limit %d) = %v, want %v", tt.keep, tt.skip, tt.limit, ids(got), tt.want)
		}
	}
	if _, err := p.OldestEmails(ctx, acctA, 0, -1, 10); !store.IsCode(err, store.Invalid) {
		t.Errorf("OldestEmails(skip -1): %v, want Invalid", err)
	}
	if got := ids(oldest(acctB, 0, 100)); !equalIDs(got, idsOf(8)) {
		t.Errorf("OldestEmails of the other account = %v, want %v", got, idsOf(8))
	}

	if err := s.DeleteEmail(ctx, acctA, id(2)); err != nil {
		t.Fatal(err)
	}
	if got := ids(oldest(acctA, 0, 2)); !equalIDs(got, idsOf(3, 4)) {
		t.Errorf("OldestEmails after deleting the oldest = %v, want %v", got, idsOf(3, 4))
	}
	if got := ids(oldest(acctA, 5, 100)); !equalIDs(got, idsOf(3)) {
		t.Errorf("OldestEmails(keep 5) after deleting the oldest = %v, want %v", got, idsOf(3))
	}

	for _, tt := range []struct {
		keep  int64
		limit int
	}{{0, 0}, {0, 101}, {0, -1}, {-1, 10}} {
		_, err := p.OldestEmails(ctx, acctA, tt.keep, 0, tt.limit)
		wantCode(t, err, store.Invalid, fmt.Sprintf("OldestEmails(keep %d, limit %d)", tt.keep, tt.limit))
	}
}

// testOldestConcurrentKeep checks the promise that makes concurrent pruning
// safe: pruners that each delete what OldestEmails(keep) gave them, at the
// same time, leave exactly the newest keep emails.
func testOldestConcurrentKeep(t *testing.T, s Store) {
	p := s
	ctx := context.Background()
	const total, keep, pruners = 60, 15, 4
	emails := make([]*store.Email, total)
	for i := range emails {
		emails[i] = newEmail(acctA, i)
	}
	createAll(t, s, emails)

	var wg sync.WaitGroup
	errs := make(chan error, pruners)
	for range pruners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				batch, err := p.OldestEmails(ctx, acctA, keep, 0, 4)
				if err != nil {
					errs <- err
					return
				}
				if len(batch) == 0 {
					return
				}
				for _, e := range batch {
					if err := s.DeleteEmail(ctx, acctA, e.ID); err != nil && !store.IsCode(err, store.NotFound) {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := listIDs(t, s, store.ListQuery{AccountID: acctA, Limit: 100})
	var want []string
	for i := total - 1; i >= total-keep; i-- {
		want = append(want, id(i))
	}
	if !equalIDs(got, want) {
		t.Errorf("after concurrent pruning to %d: %d emails left %v, want %v", keep, len(got), got, want)
	}
	// The newest emails' numbers all have two digits, so one size.
	wantStats(t, s, acctA, keep, keep*int64(len(rawFor(total-1))), "after concurrent pruning")
}
