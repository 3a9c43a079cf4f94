package boltstore

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

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
		body := &store.Body{Raw: raw, Given: &store.Parts{Headers: map[string]string{}, Attachments: []store.Attachment{}}}
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

// TestOpenDuringCompactRename starts Open while Compact holds the file
// (a service manager restarting mailsink during `mailsink compact`): Open
// waits for the lock on the file it opened, Compact renames its copy over
// the path and lets go. Open must then use the file at the path, not the
// one the rename unlinked, where every email it stored would be lost.
func TestOpenDuringCompactRename(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc/self/fd to see that Open has opened the file")
	}
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "mailsink.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Compact's read-only source, holding the file's lock.
	src, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan *Store, 1)
	go func() {
		s, err := Open(path, WithLockTimeout(30*time.Second))
		if err != nil {
			t.Error(err)
		}
		opened <- s
	}()
	for deadline := time.Now().Add(10 * time.Second); openFDs(t, path) < 2; {
		if time.Now().After(deadline) {
			t.Fatal("Open did not open the file")
		}
		runtime.Gosched()
	}
	// Compact's copy, with an email in it, renamed over the path.
	tmp := path + ".compact"
	c, err := Open(tmp)
	if err != nil {
		t.Fatal(err)
	}
	marker := testEmail("0190b6d2-7c3e-7a1b-8c2d-000000000001", "r@example.com", 1000)
	if err := c.CreateEmails(ctx, &store.Body{Raw: []byte("copy"), Given: &store.Parts{Headers: map[string]string{}, Attachments: []store.Attachment{}}}, []*store.Email{marker}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	src.Close()
	s = <-opened
	if s == nil {
		return
	}
	defer s.Close()
	if _, err := s.GetEmail(ctx, "acct", marker.ID); err != nil {
		t.Errorf("GetEmail of the compacted file's email after Open: %v; Open is using the unlinked file", err)
	}
}

// openFDs returns how many of this process's open files are path.
func openFDs(t *testing.T, path string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && l == path {
			n++
		}
	}
	return n
}
