package boltv4

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mailsink/mailsink/store"
)

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

func ptr[T any](v T) *T { return &v }

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
}
