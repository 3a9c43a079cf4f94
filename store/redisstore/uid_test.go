package redisstore

import (
	"context"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/store"
)

// TestUIDBackfill: emails stored before UIDs (here: taken out of the UID
// index, as a release without UIDs would leave them) get UIDs at the next
// look, oldest first and above every UID given, while numbered emails keep
// theirs; a UID whose email an older release deleted is dropped.
func TestUIDBackfill(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(testing.TB) *Store) {
		s := newStore(t)
		s.batch = 2 // several batches for five emails
		ctx := context.Background()
		const acct = "acct"
		var emails []*store.Email
		for i := range 5 {
			e := testEmail(acct, "r@example.com", "s@example.com", 1_000_000+int64(i)*1000)
			emails = append(emails, e)
			if err := s.CreateEmails(ctx, testBody("x"), []*store.Email{e}); err != nil {
				t.Fatal(err)
			}
		}
		before, err := s.MailboxUIDs(ctx, store.UIDQuery{AccountID: acct, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		k := s.account(acct)
		// Emails 0 and 2 as an older release stores them, and a UID left
		// by an older release's delete.
		if err := s.client.ZRem(ctx, k.uids(), emails[0].ID, emails[2].ID).Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.client.ZAdd(ctx, k.uids(), redisZ(99, "gone")).Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.client.HSet(ctx, k.uidCounter(), "n", 99).Err(); err != nil {
			t.Fatal(err)
		}
		after, err := s.MailboxUIDs(ctx, store.UIDQuery{AccountID: acct, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		got := make([]string, len(after.Emails))
		for i, e := range after.Emails {
			got[i] = e.ID
		}
		want := []string{emails[1].ID, emails[3].ID, emails[4].ID, emails[0].ID, emails[2].ID}
		if !slices.Equal(got, want) {
			t.Fatalf("after backfill: %v, want %v", got, want)
		}
		if after.Emails[0].UID != before.Emails[1].UID || after.Emails[3].UID != 100 || after.Emails[4].UID != 101 {
			t.Errorf("UIDs %+v: numbered emails must keep theirs, the others come after 99", after.Emails)
		}
		if after.UIDValidity != before.UIDValidity || after.UIDNext != 102 {
			t.Errorf("validity %d (was %d), next %d (want 102)", after.UIDValidity, before.UIDValidity, after.UIDNext)
		}
	})
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }
