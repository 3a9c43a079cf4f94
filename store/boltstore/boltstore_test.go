package boltstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mailsink/mailsink/internal/rawzip"
	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Store {
		return openTemp(t, filepath.Join(t.TempDir(), "mailsink.db"))
	})
}

// openTemp opens a store at path and closes it when the test ends.
func openTemp(t testing.TB, path string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(path, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func testEmail(id, recipient string, ms int64) *store.Email {
	at := time.UnixMilli(ms).UTC()
	return &store.Email{
		ID: id, AccountID: "acct", Sender: "s@example.com", Recipient: recipient,
		Status: store.StatusReceived, Labels: []string{}, ReceivedAt: at, CreatedAt: at, UpdatedAt: at,
	}
}

// TestReopen checks that everything written, including updates and deletes,
// is there after the file is closed and opened again.
func TestReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mailsink.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	body := &store.Body{Raw: []byte("raw \xff"), Given: &store.Parts{Headers: map[string]string{"a": "b"}, Attachments: []store.Attachment{}}}
	a := testEmail("0190b6d2-7c3e-7a1b-8c2d-000000000001", "a@example.com", 1000)
	b := testEmail("0190b6d2-7c3e-7a1b-8c2d-000000000002", "b@example.com", 2000)
	c := testEmail("0190b6d2-7c3e-7a1b-8c2d-000000000003", "c@example.com", 3000)
	if err := s.CreateEmails(ctx, body, []*store.Email{a, b, c}); err != nil {
		t.Fatal(err)
	}
	archived := store.StatusArchived
	if _, err := s.UpdateEmail(ctx, "acct", b.ID, store.Update{Status: &archived, UpdatedAt: time.UnixMilli(5000)}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteEmail(ctx, "acct", a.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); !store.IsCode(err, store.Unavailable) {
		t.Errorf("Ping after Close: got %v, want code Unavailable", err)
	}
	if _, err := s.GetEmail(ctx, "acct", b.ID); !store.IsCode(err, store.Unavailable) {
		t.Errorf("GetEmail after Close: got %v, want code Unavailable", err)
	}
	if err := s.CreateEmails(ctx, body, []*store.Email{testEmail("0190b6d2-7c3e-7a1b-8c2d-000000000004", "d@example.com", 1)}); !store.IsCode(err, store.Unavailable) {
		t.Errorf("CreateEmails after Close: got %v, want code Unavailable", err)
	}

	s = openTemp(t, path)
	got, err := s.ListEmails(ctx, store.ListQuery{AccountID: "acct", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != c.ID || got[1].ID != b.ID {
		t.Fatalf("ListEmails after reopening: got %d emails, want [%s %s]", len(got), c.ID, b.ID)
	}
	if got[1].Status != store.StatusArchived || !got[1].UpdatedAt.Equal(time.UnixMilli(5000)) {
		t.Errorf("email %s after reopening: status %s, updatedAt %s; want archived, 5000ms", b.ID, got[1].Status, got[1].UpdatedAt)
	}
	if ids, err := s.ListEmails(ctx, store.ListQuery{AccountID: "acct", Status: store.StatusArchived, Limit: 10}); err != nil || len(ids) != 1 {
		t.Errorf("ListEmails(status=archived) after reopening: got %d emails, %v; want 1", len(ids), err)
	}
	gotBody, err := s.GetBody(ctx, "acct", c.ID)
	if err != nil || string(gotBody.Raw) != string(body.Raw) {
		t.Errorf("GetBody after reopening: got %v, %v; want raw %q", gotBody, err, body.Raw)
	}
	if n, err := s.BodyCount(ctx); err != nil || n != 1 {
		t.Errorf("BodyCount after reopening: got %d, %v; want 1", n, err)
	}
	// New writes after reopening do not collide with the bodies written before.
	d := testEmail("0190b6d2-7c3e-7a1b-8c2d-000000000004", "d@example.com", 4000)
	if err := s.CreateEmails(ctx, &store.Body{Raw: []byte("new")}, []*store.Email{d}); err != nil {
		t.Fatal(err)
	}
	if gotBody, err := s.GetBody(ctx, "acct", c.ID); err != nil || string(gotBody.Raw) != string(body.Raw) {
		t.Errorf("GetBody of an old email after a new create: got %v, %v; want raw %q", gotBody, err, body.Raw)
	}
	if n, err := s.BodyCount(ctx); err != nil || n != 2 {
		t.Errorf("BodyCount: got %d, %v; want 2", n, err)
	}
}

// TestOpenLocked checks that a file held open elsewhere fails fast with a
// clear error instead of hanging.
func TestOpenLocked(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "mailsink.db")
	openTemp(t, path)
	start := time.Now()
	s, err := Open(path, WithLockTimeout(100*time.Millisecond))
	if err == nil {
		_ = s.Close()
		t.Fatal("Open of a locked file: got nil error")
	}
	if !store.IsCode(err, store.Unavailable) {
		t.Errorf("Open of a locked file: got %v, want code Unavailable", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Open of a locked file took %s", elapsed)
	}
	t.Logf("error: %v", err)
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing", "mailsink.db")); err == nil {
		t.Error("Open in a missing directory: got nil error")
	}
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, make([]byte, 64<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(garbage); err == nil {
		t.Error("Open of a file that is not a store: got nil error")
	}
}

// TestCreateConflict checks an id that is already stored: nothing of the
// second create is kept.
func TestCreateConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTemp(t, filepath.Join(t.TempDir(), "mailsink.db"))
	a := testEmail("0190b6d2-7c3e-7a1b-8c2d-000000000001", "a@example.com", 1000)
	b := testEmail("0190b6d2-7c3e-7a1b-8c2d-000000000002", "b@example.com", 1000)
	if err := s.CreateEmails(ctx, &store.Body{}, []*store.Email{a}); err != nil {
		t.Fatal(err)
	}
	err := s.CreateEmails(ctx, &store.Body{}, []*store.Email{b, a})
	if !store.IsCode(err, store.Conflict) {
		t.Errorf("CreateEmails with a stored id: got %v, want code Conflict", err)
	}
	if _, err := s.GetEmail(ctx, "acct", b.ID); !store.IsCode(err, store.NotFound) {
		t.Errorf("GetEmail of the other email of a refused create: got %v, want NotFound", err)
	}
	if n, err := s.BodyCount(ctx); err != nil || n != 1 {
		t.Errorf("BodyCount: got %d, %v; want 1", n, err)
	}
	err = s.CreateEmails(ctx, &store.Body{}, []*store.Email{b, b})
	if !store.IsCode(err, store.Invalid) {
		t.Errorf("CreateEmails with an id twice: got %v, want code Invalid", err)
	}
}

func TestListInvalid(t *testing.T) {
	t.Parallel()
	s := openTemp(t, filepath.Join(t.TempDir(), "mailsink.db"))
	for _, q := range []store.ListQuery{
		{AccountID: "", Limit: 10},
		{AccountID: "acct", Limit: 0},
		{AccountID: "acct", Limit: 10, Offset: -1},
	} {
		if _, err := s.ListEmails(context.Background(), q); !store.IsCode(err, store.Invalid) {
			t.Errorf("ListEmails(%+v): got %v, want code Invalid", q, err)
		}
	}
}

// TestAccountPrefixes checks that account ids that are prefixes of each other,
// or hold separator bytes, do not see each other's emails.
func TestAccountPrefixes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTemp(t, filepath.Join(t.TempDir(), "mailsink.db"))
	accounts := []string{"a", "a\x00", "a\x00r", "ab", "\xff", "\xff\xff"}
	for i, acct := range accounts {
		e := testEmail("0190b6d2-7c3e-7a1b-8c2d-00000000000"+string(rune('0'+i)), "x@example.com", 1000)
		e.AccountID = acct
		if err := s.CreateEmails(ctx, &store.Body{}, []*store.Email{e}); err != nil {
			t.Fatal(err)
		}
	}
	for i, acct := range accounts {
		for _, q := range []store.ListQuery{
			{AccountID: acct, Limit: 10},
			{AccountID: acct, Recipient: "x@example.com", Limit: 10},
		} {
			got, err := s.ListEmails(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].AccountID != acct {
				t.Errorf("account %q (#%d): got %d emails, want its one", acct, i, len(got))
			}
		}
	}
}

func TestCorruptRecord(t *testing.T) {
	t.Parallel()
	key := emailKey("acct", "id")
	for _, b := range [][]byte{nil, {emailFormat}, {emailFormat, 0xff}, {2}, {emailFormatOne}, {9}} {
		if _, err := decodeEmail(key, b); !errors.Is(err, errCorrupt) {
			t.Errorf("decodeEmail(%x): got %v, want errCorrupt", b, err)
		}
		if _, err := decodeBody(b); !errors.Is(err, errCorrupt) {
			t.Errorf("decodeBody(%x): got %v, want errCorrupt", b, err)
		}
	}
	full := encodeEmail(&emailRecord{Email: *testEmail("id", "r@example.com", 1)})
	for i := range full {
		if _, err := decodeEmail(key, full[:i]); err == nil {
			t.Errorf("decodeEmail of %d of %d bytes: got nil error", i, len(full))
		}
	}
	for _, k := range [][]byte{nil, {0x80}, {5, 'a'}} {
		if _, err := decodeEmail(k, full); !errors.Is(err, errCorrupt) {
			t.Errorf("decodeEmail under key %x: got %v, want errCorrupt", k, err)
		}
	}
	body := encodeBody(new(rawzip.Compressor), &store.Body{Raw: bytes.Repeat([]byte("compressible "), 100), Transcript: &store.Transcript{}})
	for i := range body {
		if _, err := decodeBody(body[:i]); err == nil {
			t.Errorf("decodeBody of %d of %d bytes: got nil error", i, len(body))
		}
	}
	bad := append([]byte{bodyFormat, 0x80}, body[2:]...)
	if _, err := decodeBody(bad); !errors.Is(err, errCorrupt) {
		t.Errorf("decodeBody with an unknown flag: got %v, want errCorrupt", err)
	}
	if _, err := decodeBody([]byte{bodyFormat + 1, 0}); !errors.Is(err, errCorrupt) {
		t.Errorf("decodeBody of format %d: got %v, want errCorrupt", bodyFormat+1, err)
	}
}

func TestPrefixEnd(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want []byte }{
		{[]byte("ab"), []byte("ac")},
		{[]byte{1, 0xff}, []byte{2}},
		{[]byte{0xff, 0xff}, nil},
		{[]byte{}, nil},
	}
	for _, tt := range tests {
		if got := prefixEnd(tt.in); string(got) != string(tt.want) || (got == nil) != (tt.want == nil) {
			t.Errorf("prefixEnd(%x) = %x, want %x", tt.in, got, tt.want)
		}
	}
}

// TestUpgradeStats checks that opening a version 1 file, which has no stats
// bucket, counts its emails, and that a file of a later version is refused.
func TestUpgradeStats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mailsink.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	a := testEmail("0190b6d2-7c3e-7a1b-8c2d-000000000001", "a@example.com", 1000)
	b := testEmail("0190b6d2-7c3e-7a1b-8c2d-000000000002", "b@example.com", 2000)
	c := testEmail("0190b6d2-7c3e-7a1b-8c2d-000000000003", "c@example.com", 3000)
	a.RawSize, b.RawSize, c.RawSize, c.AccountID = 10, 20, 40, "other"
	if err := s.CreateEmails(ctx, &store.Body{}, []*store.Email{a, b}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateEmails(ctx, &store.Body{}, []*store.Email{c}); err != nil {
		t.Fatal(err)
	}
	if err := s.wal.settleAll(ctx); err != nil {
		t.Fatal(err)
	}
	// Make it a version 1 file.
	err = s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketStats); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put([]byte("version"), []byte("1"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTemp(t, path)
	for _, tt := range []struct {
		account       string
		emails, bytes int64
	}{{"acct", 2, 30}, {"other", 1, 40}, {"none", 0, 0}} {
		n, size, err := s.AccountStats(ctx, tt.account)
		if err != nil || n != tt.emails || size != tt.bytes {
			t.Errorf("AccountStats(%s) after the upgrade = %d, %d, %v; want %d, %d", tt.account, n, size, err, tt.emails, tt.bytes)
		}
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put([]byte("version"), []byte("5"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(path); err == nil || !strings.Contains(err.Error(), "newer mailsink") {
		if s != nil {
			s.Close()
		}
		t.Errorf("Open of a version 5 file: got %v, want an error that names a newer mailsink", err)
	}
	if _, _, err := Compact(path); err == nil || !strings.Contains(err.Error(), "newer mailsink") {
		t.Errorf("Compact of a version 5 file: got %v, want an error that names a newer mailsink", err)
	}
}

// TestFaultCache checks the fault rules' cache step by step: a read from
// the file that a change overtook is not kept, another account's change
// does not void it, and a closed store serves nothing from it.
func TestFaultCache(t *testing.T) {
	t.Parallel()
	var c faultCache
	rules := []*store.FaultRule{{ID: "r1", AccountID: "a"}}
	if _, _, ok := c.get("a"); ok {
		t.Fatal("an empty cache served rules")
	}

	// A read that began before a change ended must not store what it read.
	_, gen, _ := c.get("a")
	c.forget("a")
	c.put("a", gen, rules)
	if _, _, ok := c.get("a"); ok {
		t.Error("a read overtaken by a change was kept")
	}

	// Another account's change does not void a read.
	_, gen, _ = c.get("a")
	c.forget("b")
	c.put("a", gen, rules)
	got, _, ok := c.get("a")
	if !ok || len(got) != 1 || got[0].ID != "r1" {
		t.Fatalf("a read with only another account's change between: got %v, %v", got, ok)
	}
	if got[0] == rules[0] {
		t.Error("the cache handed out the rule it was given, not a copy")
	}

	c.forget("a")
	if _, _, ok := c.get("a"); ok {
		t.Error("rules served after the account's change")
	}

	_, gen, _ = c.get("a")
	c.put("a", gen, rules)
	_, gen2, _ := c.get("b")
	c.close()
	if _, _, ok := c.get("a"); ok {
		t.Error("rules served after close")
	}
	c.put("b", gen2, rules) // a read that began before close
	if _, _, ok := c.get("b"); ok {
		t.Error("rules stored after close")
	}
}

// TestFaultsAfterClose checks that a closed store's fault rules are
// unavailable, as everything else of it is, even when they were cached.
func TestFaultsAfterClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "mailsink.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Faults(ctx, "acct"); err != nil { // cached: none
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Faults(ctx, "acct"); !store.IsCode(err, store.Unavailable) {
		t.Errorf("Faults after Close: got %v, want Unavailable", err)
	}
}
