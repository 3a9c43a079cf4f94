package storetest

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/mailsink/mailsink/store"
)

func uidPage(t *testing.T, s Store, q store.UIDQuery) store.UIDPage {
	t.Helper()
	p, err := s.MailboxUIDs(context.Background(), q)
	if err != nil {
		t.Fatalf("MailboxUIDs(%+v): %v", q, err)
	}
	return p
}

func uidIDs(p store.UIDPage) []string {
	out := make([]string, len(p.Emails))
	for i, e := range p.Emails {
		out[i] = e.ID
	}
	return out
}

// testMailboxUIDs: every email gets a UID when stored, in the order creates
// commit (not by ReceivedAt), above every UID given before, never given
// again after a delete; windows select by UID; the validity stays; each
// account numbers its own emails.
func testMailboxUIDs(t *testing.T, s Store) {
	ctx := context.Background()
	empty := uidPage(t, s, store.UIDQuery{AccountID: acctA, Limit: 10})
	if empty.UIDValidity == 0 || empty.UIDNext == 0 || len(empty.Emails) != 0 {
		t.Fatalf("empty account: %+v, want a validity, a next UID and no emails", empty)
	}
	// Stored in the order 3, 1, then 2 and 4 in one create: UIDs follow.
	create(t, s, newEmail(acctA, 3), newEmail(acctA, 1))
	if err := s.CreateEmails(ctx, newBody(2), []*store.Email{newEmail(acctA, 2), newEmail(acctA, 4)}); err != nil {
		t.Fatal(err)
	}
	all := uidPage(t, s, store.UIDQuery{AccountID: acctA, Limit: 10})
	if got, want := uidIDs(all), []string{id(3), id(1), id(2), id(4)}; !slices.Equal(got, want) {
		t.Fatalf("emails by UID: %v, want %v", got, want)
	}
	for i, e := range all.Emails {
		if e.UID == 0 || i > 0 && e.UID <= all.Emails[i-1].UID {
			t.Fatalf("UIDs %+v are not ascending from 1 on", all.Emails)
		}
	}
	if last := all.Emails[len(all.Emails)-1].UID; all.UIDNext <= last || all.UIDValidity != empty.UIDValidity {
		t.Fatalf("next %d after UID %d, validity %d then %d", all.UIDNext, last, empty.UIDValidity, all.UIDValidity)
	}
	u := func(i int) uint32 { return all.Emails[i].UID }
	for _, tc := range []struct {
		name string
		q    store.UIDQuery
		want []string
	}{
		{"after", store.UIDQuery{After: u(1), Limit: 10}, []string{id(2), id(4)}},
		{"before", store.UIDQuery{Before: u(2), Limit: 10}, []string{id(3), id(1)}},
		{"window", store.UIDQuery{After: u(0), Before: u(3), Limit: 10}, []string{id(1), id(2)}},
		{"limit", store.UIDQuery{Limit: 2}, []string{id(3), id(1)}},
		{"newest", store.UIDQuery{Limit: 2, Newest: true}, []string{id(2), id(4)}},
		{"newest before", store.UIDQuery{Before: u(3), Limit: 2, Newest: true}, []string{id(1), id(2)}},
		{"past the end", store.UIDQuery{After: u(3), Limit: 10}, []string{}},
	} {
		tc.q.AccountID = acctA
		if got := uidIDs(uidPage(t, s, tc.q)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}

	// Deleting the highest does not let its UID be given again.
	if err := s.DeleteEmail(ctx, acctA, id(4)); err != nil {
		t.Fatal(err)
	}
	create(t, s, newEmail(acctA, 5))
	after := uidPage(t, s, store.UIDQuery{AccountID: acctA, Limit: 10})
	if got, want := uidIDs(after), []string{id(3), id(1), id(2), id(5)}; !slices.Equal(got, want) {
		t.Fatalf("after a delete and a create: %v, want %v", got, want)
	}
	if got := after.Emails[3].UID; got <= u(3) {
		t.Errorf("new email's UID %d is not above the deleted one's %d", got, u(3))
	}
	if after.UIDValidity != empty.UIDValidity {
		t.Errorf("validity changed from %d to %d", empty.UIDValidity, after.UIDValidity)
	}

	// Another account numbers its own.
	create(t, s, newEmail(acctB, 9))
	b := uidPage(t, s, store.UIDQuery{AccountID: acctB, Limit: 10})
	if got := uidIDs(b); !slices.Equal(got, []string{id(9)}) {
		t.Errorf("account B: %v, want only its email", got)
	}

	for _, limit := range []int{0, -1, store.MaxUIDPage + 1} {
		_, err := s.MailboxUIDs(ctx, store.UIDQuery{AccountID: acctA, Limit: limit})
		wantCode(t, err, store.Invalid, "MailboxUIDs with a bad limit")
	}
}

// testMailboxUIDsConcurrent: creates at once get distinct UIDs, and each
// is listed.
func testMailboxUIDsConcurrent(t *testing.T, s Store) {
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- s.CreateEmails(context.Background(), newBody(i), []*store.Email{newEmail(acctA, 100+i)})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	p := uidPage(t, s, store.UIDQuery{AccountID: acctA, Limit: store.MaxUIDPage})
	if len(p.Emails) != n {
		t.Fatalf("%d emails listed, want %d", len(p.Emails), n)
	}
	seen := map[string]bool{}
	for i, e := range p.Emails {
		if i > 0 && e.UID <= p.Emails[i-1].UID {
			t.Fatalf("UIDs not strictly ascending at %d: %d after %d", i, e.UID, p.Emails[i-1].UID)
		}
		seen[e.ID] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct ids, want %d", len(seen), n)
	}
}
