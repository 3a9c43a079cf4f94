package boltstore

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/mailsink/mailsink/store"
)

// TestCompactGivesSpaceBack checks that after most emails are deleted the
// file keeps its size (bbolt reuses, never returns, free pages), that
// Compact shrinks it, and that what was kept is intact.
func TestCompactGivesSpaceBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mailsink.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// Random bytes: they do not compress.
	raw := make([]byte, 64<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range raw {
		raw[i] = byte(r.Uint32())
	}
	var ids []string
	for i := range 200 {
		id := fmt.Sprintf("0190b6d2-7c3e-7a1b-8c2d-%012d", i)
		body := &store.Body{Raw: raw, Headers: map[string]string{}, Attachments: []store.Attachment{}}
		if err := s.CreateEmails(ctx, body, []*store.Email{testEmail(id, "r@example.com", int64(1000+i))}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, id := range ids[:190] {
		if err := s.DeleteEmail(ctx, "acct", id); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before, after, err := Compact(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("file %d bytes after deleting 190 of 200 64 KiB emails, %d after Compact", before, after)
	if before < 190*64<<10 {
		t.Errorf("the file was %d bytes before compaction: smaller than what was deleted, the test shows nothing", before)
	}
	if after > before/5 {
		t.Errorf("Compact left %d of %d bytes, want at most a fifth", after, before)
	}
	s = openTemp(t, path)
	for _, id := range ids[190:] {
		b, err := s.GetBody(ctx, "acct", id)
		if err != nil || !bytes.Equal(b.Raw, raw) {
			t.Fatalf("email %s after Compact: %v", id, err)
		}
	}
	if n, _, err := s.AccountStats(ctx, "acct"); err != nil || n != 10 {
		t.Errorf("AccountStats after Compact = %d, %v; want 10", n, err)
	}
}
