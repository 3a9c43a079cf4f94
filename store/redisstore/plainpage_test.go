package redisstore

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/store"
)

// scriptPage is the page pageScript answers for q, the way ListEmails read
// every page before plainPage.
func scriptPage(t *testing.T, s *Store, q store.ListQuery) []*store.Email {
	t.Helper()
	ctx := context.Background()
	k, f := queryFilter(t, s, q)
	v, err := pageScript.Run(ctx, s.client, f.indexes, k.emailPrefix(), f.since, f.cursorScore, f.cursorID,
		formatInt(q.Offset), q.Limit, k.records()).Slice()
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeItems(v, "page", q.AccountID)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// plainTaken reports whether plainPage answers q itself, rather than
// leaving it to the script.
func plainTaken(t *testing.T, s *Store, q store.ListQuery) bool {
	t.Helper()
	k, f := queryFilter(t, s, q)
	_, ok, err := s.plainPage(context.Background(), k, f, q)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// queryFilter returns q's account keys and filter, as ListEmails makes
// them, for calling its two ways of reading a page directly.
func queryFilter(t *testing.T, s *Store, q store.ListQuery) (accountKeys, filter) {
	t.Helper()
	k := s.account(q.AccountID)
	f, err := s.filter(context.Background(), k, q)
	if err != nil {
		t.Fatal(err)
	}
	return k, f
}

// commandNames records the names of the commands a client sends.
type commandNames struct {
	mu    sync.Mutex
	names []string
}

func (c *commandNames) add(cmds ...redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cmd := range cmds {
		c.names = append(c.names, cmd.Name())
	}
}

// take returns the names recorded since the last take.
func (c *commandNames) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := c.names
	c.names = nil
	return names
}

func (c *commandNames) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandNames) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd)
		return next(ctx, cmd)
	}
}

func (c *commandNames) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.add(cmds...)
		return next(ctx, cmds)
	}
}

// TestPlainPageMatchesScript checks that a page read without a script is
// the page pageScript reads, email for email and field for field, on every
// single-index list (all, recipient, sender, status) at offsets inside,
// across and past the end of the index and with limits from 1 to 100; that
// the plain read is the one taken when the index holds emails of the
// current layout only; and that the script answers when it cannot be: an
// email of the older layout on the page, an index entry whose email is
// gone, or one whose email has another status by now.
func TestPlainPageMatchesScript(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(t testing.TB) *Store) {
		t.Parallel()
		ctx := context.Background()
		s := newStore(t)
		sent := &commandNames{}
		s.client.AddHook(sent)
		rcpts := []string{"a@example.com", "b@example.com", "c@example.com"}
		senders := []string{"x@example.com", "y@example.com"}
		var emails []*store.Email
		for i := range 90 {
			e := testEmail(acct, rcpts[i%3], senders[i%2], 1_700_000_000_000+int64(i/2)) // pairs share a millisecond
			e.Subject = ptr(fmt.Sprintf("subject %d", i))
			if i%5 == 0 {
				e.Notes = ptr("a note")
			}
			if err := s.CreateEmails(ctx, testBody(fmt.Sprintf("raw %d", i)), []*store.Email{e}); err != nil {
				t.Fatal(err)
			}
			emails = append(emails, e)
		}
		for i, e := range emails {
			u := store.Update{UpdatedAt: time.UnixMilli(1_800_000_000_000).UTC()}
			switch i % 4 {
			case 1:
				u.Status = ptr(store.StatusProcessed)
			case 2:
				u.Status, u.Labels, u.Read = ptr(store.StatusArchived), &[]string{"l1", "l2"}, ptr(true)
			default:
				continue
			}
			if _, err := s.UpdateEmail(ctx, acct, e.ID, u); err != nil {
				t.Fatal(err)
			}
		}

		queries := []store.ListQuery{{}, {Recipient: "A@example.com"}, {Recipient: "c@example.com"}, {Sender: "y@example.com"},
			{Status: store.StatusReceived}, {Status: store.StatusProcessed}, {Status: store.StatusArchived}, {Recipient: "nobody@example.com"}}
		compare := func(t *testing.T, wantPlain bool) {
			t.Helper()
			for _, base := range queries {
				for _, page := range []struct {
					offset int64
					limit  int
				}{{0, 1}, {0, 25}, {0, 100}, {7, 7}, {20, 25}, {29, 2}, {89, 5}, {90, 10}, {500, 25}} {
					q := base
					q.AccountID, q.Offset, q.Limit = acct, page.offset, page.limit
					sent.take()
					got, err := s.ListEmails(ctx, q)
					if err != nil {
						t.Fatalf("ListEmails(%+v): %v", q, err)
					}
					if names := sent.take(); wantPlain && slices.Contains(names, "evalsha") {
						t.Errorf("ListEmails(%+v) of current-layout emails sent %v, want no script", q, names)
					}
					if want := scriptPage(t, s, q); !reflect.DeepEqual(got, want) {
						t.Errorf("ListEmails(%+v) = %v, the script's page is %v", q, ids(got), ids(want))
					}
					if wantPlain && !plainTaken(t, s, q) {
						t.Errorf("ListEmails(%+v) left a page of current-layout emails to the script", q)
					}
				}
			}
		}
		compare(t, true)

		// An email of the older layout among them: its pages are the
		// script's, which reads both layouts.
		older := testEmail(acct, "a@example.com", "x@example.com", 1_700_000_000_100)
		createOlder(t, s, testBody("older"), older)
		first := store.ListQuery{AccountID: acct, Recipient: "a@example.com", Limit: 5}
		if plainTaken(t, s, first) {
			t.Error("plainPage answered a page with an email of the older layout")
		}
		compare(t, false)
		if got, err := s.ListEmails(ctx, first); err != nil || len(got) != 5 || got[0].ID != older.ID {
			t.Errorf("first page by recipient = %v, %v; want the older-layout email %s first", ids(got), err, older.ID)
		}

		// Index entries that disagree with the records, as a delete or
		// an update between the plain reads would leave them, newer than
		// the older-layout email, so that they are alone on a page of 1.
		k := s.account(acct)
		processed := emails[1] // its status is processed
		if err := s.client.ZAdd(ctx, k.status(store.StatusReceived), redis.Z{Score: 1_700_000_001_000, Member: processed.ID}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.client.ZAdd(ctx, k.all(), redis.Z{Score: 1_700_000_001_001, Member: store.NewID()}).Err(); err != nil {
			t.Fatal(err)
		}
		for _, q := range []store.ListQuery{{AccountID: acct, Status: store.StatusReceived, Limit: 1}, {AccountID: acct, Limit: 1}} {
			if plainTaken(t, s, q) {
				t.Errorf("plainPage answered %+v, whose first entry disagrees with its record", q)
			}
		}
		compare(t, false)
	})
}
