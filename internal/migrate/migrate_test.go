package migrate

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/migrate/boltv4"
	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/pebblestore"
)

var quiet = slog.New(slog.DiscardHandler)

const (
	acctA = "0190b6d2-0000-7000-8000-00000000000a"
	acctB = "0190b6d2-0000-7000-8000-00000000000b"
)

func ptr[T any](v T) *T { return &v }

func email(accountID string, i int, recipient string) *store.Email {
	at := time.UnixMilli(1_767_225_600_000 + int64(i)*1000).UTC()
	return &store.Email{
		ID: store.NewID(), AccountID: accountID, MessageID: ptr("<m" + string(rune('a'+i)) + "@x>"),
		Sender: "s@example.com", Recipient: recipient, Subject: ptr("subject"), Status: store.StatusReceived,
		Labels: []string{}, RawSize: int64(100 + i), ReceivedAt: at, CreatedAt: at, UpdatedAt: at,
	}
}

// writeOld fills an earlier release's store at path with one of each thing
// it keeps, in the states its API leaves them in, and returns the
// idempotency keys it used.
func writeOld(t *testing.T, path string) []string {
	t.Helper()
	ctx := context.Background()
	s, err := boltv4.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// A message over SMTP with its transcript; one created with given
	// parts for two recipients (one body), one of them read; one deleted.
	one := email(acctA, 1, "a@example.com")
	must(s.CreateEmails(ctx, &store.Body{Raw: []byte("Subject: one\r\n\r\nbody one\r\n"), Transcript: &store.Transcript{
		ClientAddress: "127.0.0.1:1", Helo: "client", Mail: store.TranscriptCommand{Address: "s@example.com", Params: []string{}, Reply: "250 ok"},
		Rcpts: []store.TranscriptCommand{{Address: "a@example.com", Params: []string{}, Reply: "250 ok"}}, Data: "250 queued"}},
		[]*store.Email{one}))
	two, three := email(acctA, 2, "b@example.com"), email(acctA, 3, "c@example.com")
	must(s.CreateEmails(ctx, &store.Body{Raw: []byte("raw two"), Given: &store.Parts{Text: ptr("text"), HTML: ptr("<p>html</p>"),
		Headers: map[string]string{"x-h": "v"}, Attachments: []store.Attachment{{Filename: ptr("f.txt"), Size: 3}}}},
		[]*store.Email{two, three}))
	gone := email(acctA, 4, "a@example.com")
	must(s.CreateEmails(ctx, &store.Body{Raw: []byte("gone")}, []*store.Email{gone}))
	must(s.DeleteEmail(ctx, acctA, gone.ID))
	_, err = s.UpdateEmail(ctx, acctA, two.ID, store.Update{Labels: &[]string{"l1", "l2"}, Notes: &store.Nullable{Value: ptr("a note")},
		Status: ptr(store.StatusArchived), Read: ptr(true), UpdatedAt: time.UnixMilli(1_767_225_700_000)})
	must(err)
	must(s.CreateEmails(ctx, &store.Body{Raw: []byte("other account")}, []*store.Email{email(acctB, 5, "z@example.com")}))
	must(s.PutCheck(ctx, acctA, one.ID, "html", []byte(`{"warnings":[]}`)))
	must(s.PutCheck(ctx, acctA, three.ID, "links", []byte(`{"items":[]}`)))

	must(s.CreateFault(ctx, &store.FaultRule{ID: store.NewID(), AccountID: acctA, Stage: store.FaultRcpt,
		Reply: &store.FaultReply{Code: 451, Text: "try later"}, Count: 3, Remaining: 2, Probability: ptr(0.5),
		CreatedAt: time.UnixMilli(1_767_225_600_000).UTC(), ExpiresAt: time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)}))

	created := time.UnixMilli(1_767_225_600_000).UTC()
	hook := &store.Webhook{ID: store.NewID(), AccountID: acctA, URL: "https://hooks.example/a", Events: []store.EventType{store.EmailCreated},
		Filter: store.WebhookFilter{Recipient: "a@example.com"}, Secret: "whsec_c2VjcmV0", CreatedAt: created}
	must(s.CreateWebhook(ctx, hook, 10))
	off := &store.Webhook{ID: store.NewID(), AccountID: acctB, URL: "https://hooks.example/b", Events: []store.EventType{store.EmailDeleted},
		Secret: "whsec_b3RoZXI=", CreatedAt: created}
	must(s.CreateWebhook(ctx, off, 10))
	must(s.DisableWebhook(ctx, acctB, off.ID, "failing for 5 days", created.Add(time.Hour)))
	due := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)
	var ds []*store.Delivery
	for i := range 3 {
		ds = append(ds, &store.Delivery{ID: store.NewID(), AccountID: acctA, WebhookID: hook.ID, EventID: "1767225600000-" + string(rune('1'+i)),
			Type: store.EmailCreated, EmailID: one.ID, Payload: []byte(`{"type":"email.created"}`), CreatedAt: created.Add(time.Duration(i) * time.Second),
			Status: store.DeliveryPending, NextAttemptAt: due})
	}
	must(s.EnqueueDeliveries(ctx, acctA, "1767225600000-3", ds))
	// One delivered, one claimed (its lease held), one still queued.
	claimed, err := s.ClaimDeliveries(ctx, acctA, time.Now(), time.Hour, "token", 2)
	must(err)
	if len(claimed) != 2 {
		t.Fatalf("claimed %d deliveries, want 2", len(claimed))
	}
	done := claimed[0]
	at := time.Now().UTC().Truncate(time.Millisecond)
	done.Status, done.Attempts, done.LastAttemptAt, done.LastStatusCode, done.LastResponse = store.DeliverySucceeded, 1, &at, 200, "ok"
	must(s.FinishDelivery(ctx, done, "token"))

	keys := []string{"key-stored", "key-reserved"}
	for i, k := range keys {
		if _, fresh, err := s.Reserve(ctx, acctA, k, store.Reservation{Digest: "digest-" + k, IDs: []string{one.ID}}, time.Hour); err != nil || !fresh {
			t.Fatalf("Reserve(%s) = %v, %v", k, fresh, err)
		}
		if i == 0 {
			must(s.Settle(ctx, acctA, k))
		}
	}
	return keys
}

// sameStores fails the test where the new store does not hold what the old
// one does for the accounts: emails, bodies, check results, totals, fault
// rules, webhooks, deliveries, cursors and idempotency keys.
func sameStores(t *testing.T, old, got store.Store, accounts, keys []string) (emails int) {
	t.Helper()
	ctx := context.Background()
	same := func(what string, want, have any, errWant, errHave error) {
		t.Helper()
		if !reflect.DeepEqual(want, have) || (errWant == nil) != (errHave == nil) {
			t.Errorf("%s: migrated %+v (%v), want %+v (%v)", what, have, errHave, want, errWant)
		}
	}
	for _, acct := range accounts {
		n, raw, err := old.AccountStats(ctx, acct)
		n2, raw2, err2 := got.AccountStats(ctx, acct)
		same("AccountStats("+acct+")", [2]int64{n, raw}, [2]int64{n2, raw2}, err, err2)
		q := store.ListQuery{AccountID: acct, Limit: 100}
		for {
			want, err := old.ListEmails(ctx, q)
			have, err2 := got.ListEmails(ctx, q)
			same("ListEmails", want, have, err, err2)
			for _, e := range want {
				emails++
				b, err := old.GetBody(ctx, acct, e.ID)
				b2, err2 := got.GetBody(ctx, acct, e.ID)
				same("GetBody("+e.ID+")", b, b2, err, err2)
				for _, name := range []string{"html", "links", "spam", "auth"} {
					c, err := old.GetCheck(ctx, acct, e.ID, name)
					c2, err2 := got.GetCheck(ctx, acct, e.ID, name)
					same("GetCheck("+e.ID+", "+name+")", c, c2, err, err2)
				}
			}
			if len(want) < q.Limit {
				break
			}
			q.Before = want[len(want)-1].ID
		}
		f, err := old.Faults(ctx, acct)
		f2, err2 := got.Faults(ctx, acct)
		same("Faults", f, f2, err, err2)
		c, err := old.WebhookCursor(ctx, acct)
		c2, err2 := got.WebhookCursor(ctx, acct)
		same("WebhookCursor", c, c2, err, err2)
		hooks, err := old.ListWebhooks(ctx, acct)
		hooks2, err2 := got.ListWebhooks(ctx, acct)
		same("ListWebhooks", hooks, hooks2, err, err2)
		for _, h := range hooks {
			d, err := old.ListDeliveries(ctx, acct, h.ID, store.MaxDeliveryLog)
			d2, err2 := got.ListDeliveries(ctx, acct, h.ID, store.MaxDeliveryLog)
			same("ListDeliveries", d, d2, err, err2)
		}
		for _, k := range keys {
			r, fresh, err := old.Reserve(ctx, acct, k, store.Reservation{Digest: "another"}, time.Hour)
			r2, fresh2, err2 := got.Reserve(ctx, acct, k, store.Reservation{Digest: "another"}, time.Hour)
			same("Reserve("+k+")", []any{r, fresh}, []any{r2, fresh2}, err, err2)
		}
	}
	wa, err := old.WebhookAccounts(ctx)
	wa2, err2 := got.WebhookAccounts(ctx)
	slices.Sort(wa)
	slices.Sort(wa2)
	same("WebhookAccounts", wa, wa2, err, err2)
	return emails
}

// migrated runs the migration of dir and returns the new store and the old
// one as moved aside.
func migrated(t *testing.T, dir string) (got *pebblestore.Store, old *boltv4.Store) {
	t.Helper()
	if err := Run(context.Background(), dir, "store", quiet); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, gone := range []string{OldFile, "store" + partialSuffix} {
		if _, err := os.Stat(filepath.Join(dir, gone)); !os.IsNotExist(err) {
			t.Errorf("%s after the migration: %v; want it gone", gone, err)
		}
	}
	got, err := pebblestore.Open(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { got.Close() })
	old, err = boltv4.Open(filepath.Join(dir, MovedDir, OldFile))
	if err != nil {
		t.Fatalf("the old file, kept: %v", err)
	}
	t.Cleanup(func() { old.Close() })
	return got, old
}

// TestMigrateEverything migrates a directory holding one of each thing the
// earlier store keeps, and finds all of it in the new store.
func TestMigrateEverything(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keys := writeOld(t, filepath.Join(dir, OldFile))
	got, old := migrated(t, dir)
	// The deliveries' queue moved too: the one still queued is due.
	if n := sameStores(t, old, got, []string{acctA, acctB}, keys); n != 4 {
		t.Errorf("compared %d emails, want 4", n)
	}
	due, err := got.ClaimDeliveries(context.Background(), acctA, time.Now(), time.Minute, "t2", 10)
	if err != nil || len(due) != 1 {
		t.Errorf("deliveries due after the migration: %d, %v; want the one not claimed", len(due), err)
	}
	// A shared body is still freed with its last email.
	ctx := context.Background()
	list, err := got.ListEmails(ctx, store.ListQuery{AccountID: acctA, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	bodies, _ := got.BodyCount(ctx)
	for _, e := range list {
		if err := got.DeleteEmail(ctx, acctA, e.ID); err != nil {
			t.Fatal(err)
		}
	}
	if after, _ := got.BodyCount(ctx); bodies != 3 || after != 1 {
		t.Errorf("bodies before and after deleting account A's emails: %d, %d; want 3, 1", bodies, after)
	}
	if n, raw, err := got.AccountStats(ctx, acctA); n != 0 || raw != 0 || err != nil {
		t.Errorf("AccountStats after deleting every email: %d, %d, %v", n, raw, err)
	}
}

// TestMigrateSchema2Fixture migrates the oldest file kept in the tests
// (schema version 2, boltv4/testdata) and finds it all in the new store.
func TestMigrateSchema2Fixture(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data, err := os.ReadFile("boltv4/testdata/schema2.db")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, OldFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	got, old := migrated(t, dir)
	accounts := []string{"6f1d5a8e-3c1b-4f7e-9a2d-5b8c0e4d7f10", "0b5e3c1d-2a4f-5e6d-8c7b-9a0f1e2d3c4b"}
	if n := sameStores(t, old, got, accounts, []string{"key-1"}); n != 4 {
		t.Errorf("compared %d emails, want the fixture's 4", n)
	}
}

// TestRunWithoutOldStore does nothing to a directory without the earlier
// store.
func TestRunWithoutOldStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := Run(context.Background(), dir, "store", quiet); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the directory holds %v; want nothing made", entries)
	}
}
