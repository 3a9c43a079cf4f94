package pebblestore

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mailsink/mailsink/store"
)

func uidEmail(account string, n int) *store.Email {
	at := time.UnixMilli(1_000_000 + int64(n)*1000).UTC()
	return &store.Email{ID: store.NewID(), AccountID: account, Sender: "s@example.com", Recipient: "r@example.com",
		Status: store.StatusReceived, Labels: []string{}, RawSize: 1, ReceivedAt: at, CreatedAt: at, UpdatedAt: at}
}

func allUIDs(t *testing.T, s *Store, account string) store.UIDPage {
	t.Helper()
	p, err := s.MailboxUIDs(context.Background(), store.UIDQuery{AccountID: account, Limit: store.MaxUIDPage})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestUIDBackfill: emails without a UID (as a migration from the earlier
// embedded store writes them) get one at the next look, oldest first and
// above every UID given, in several batches; numbered ones keep theirs.
// UIDs and the validity survive a restart.
func TestUIDBackfill(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var emails []*store.Email
	for i := range backfillBatch + 3 {
		e := uidEmail("acct", i)
		emails = append(emails, e)
		if err := s.CreateEmails(ctx, &store.Body{Raw: []byte("x")}, []*store.Email{e}); err != nil {
			t.Fatal(err)
		}
	}
	before := allUIDs(t, s, "acct")
	// The first two and the last as a migration leaves them: no UID.
	if _, err := s.change(func(b *pebble.Batch) (int, error) {
		for _, e := range []*store.Email{emails[0], emails[1], emails[len(emails)-1]} {
			if err := s.unnumber(b, "acct", e.ID); err != nil {
				return 0, err
			}
		}
		return 0, nil
	}); err != nil {
		t.Fatal(err)
	}
	after := allUIDs(t, s, "acct")
	n := len(emails)
	if len(after.Emails) != n {
		t.Fatalf("%d emails numbered after backfill, want %d", len(after.Emails), n)
	}
	tail := []string{after.Emails[n-3].ID, after.Emails[n-2].ID, after.Emails[n-1].ID}
	if want := []string{emails[0].ID, emails[1].ID, emails[n-1].ID}; !slices.Equal(tail, want) {
		t.Errorf("backfilled emails at the end: %v, want %v (oldest first)", tail, want)
	}
	if after.Emails[0] != before.Emails[2] || after.Emails[n-3].UID != before.UIDNext {
		t.Errorf("numbered emails must keep their UIDs and the others come after %d: %+v", before.UIDNext-1, after.Emails[n-3:])
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	again := allUIDs(t, s, "acct")
	if again.UIDValidity != before.UIDValidity || !slices.Equal(again.Emails, after.Emails) || again.UIDNext != after.UIDNext {
		t.Errorf("after a restart: validity %d (was %d), next %d (was %d)", again.UIDValidity, before.UIDValidity, again.UIDNext, after.UIDNext)
	}
}

// TestUIDValidityInMemory: each start of the store in memory numbers anew,
// under another validity.
func TestUIDValidityInMemory(t *testing.T) {
	t.Parallel()
	seen := map[uint32]bool{}
	for range 3 {
		s, err := OpenInMemory(16 << 20)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CreateEmails(context.Background(), &store.Body{Raw: []byte("x")}, []*store.Email{uidEmail("acct", 1)}); err != nil {
			t.Fatal(err)
		}
		p := allUIDs(t, s, "acct")
		s.Close()
		if p.Emails[0].UID != 1 || seen[p.UIDValidity] {
			t.Fatalf("start %d: UID %d, validity %d (seen before: %v)", len(seen)+1, p.Emails[0].UID, p.UIDValidity, seen[p.UIDValidity])
		}
		seen[p.UIDValidity] = true
	}
}
