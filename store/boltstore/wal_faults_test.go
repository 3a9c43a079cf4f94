package boltstore

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mailsink/mailsink/internal/rawzip"
	"github.com/mailsink/mailsink/store"
)

// setMaxSize changes the file's size limit inside a write transaction, so
// that the applier's transactions see it (and the race detector agrees).
func setMaxSize(t *testing.T, s *Store, n int) {
	t.Helper()
	if err := s.db.Update(func(*bolt.Tx) error { s.db.MaxSize = n; return nil }); err != nil {
		t.Fatal(err)
	}
}

// waitApplyErr waits until the applier reports a failure.
func waitApplyErr(t *testing.T, s *Store) error {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		s.wal.mu.Lock()
		err, ch := s.wal.applyErr, s.wal.changed
		s.wal.mu.Unlock()
		if err != nil {
			return err
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatal("the applier did not fail")
		}
	}
}

// waitDrained waits until the applier has applied everything and succeeds.
func waitDrained(t *testing.T, s *Store) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		s.wal.mu.Lock()
		err, n, ch := s.wal.applyErr, len(s.wal.pending), s.wal.changed
		s.wal.mu.Unlock()
		if err == nil && n == 0 {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("the applier did not catch up: %v, %d pending", err, n)
		}
	}
}

// An apply batch that fails for good (one create bbolt refuses) is applied
// one create per transaction (applyEach). When a later create of the batch
// then fails for a passing reason (a full disk), the creates before it are
// committed, with their event numbers: their events go out then, or the
// hub, which publishes in number order, would hold back every later event.
func TestPartialApplyPublishes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTemp(t, filepath.Join(t.TempDir(), "mailsink.db"))
	sub := s.Subscribe("acct")
	defer sub.Close()
	if err := s.CreateEmails(ctx, &store.Body{Raw: []byte("one")}, []*store.Email{walEmail(1)}); err != nil {
		t.Fatal(err)
	}
	if err := s.wal.settleAll(ctx); err != nil {
		t.Fatal(err)
	}
	<-sub.Events() // email 1

	setMaxSize(t, s, 512<<10) // room for a small create, not for 900 KiB
	raw := make([]byte, 900<<10)
	_, _ = rand.Read(raw) // does not compress
	good1, good2 := walEmail(10), walEmail(11)
	// Three creates the applier takes in one batch: a small one, one that
	// fails for good (as in TestApplierSetsAsideAFailedCreate), and one
	// too large for the disk's room.
	s.wal.mu.Lock()
	for _, op := range []*createOp{
		logOp(good1),
		logOp(walEmail(3), walEmail(1)),
		newCreateOp(new(rawzip.Compressor), &store.Body{Raw: raw}, []*store.Email{good2}),
	} {
		s.wal.addPending(walOp{lsn: s.wal.nextLSN, op: op})
		s.wal.nextLSN++
	}
	s.wal.mu.Unlock()
	s.wal.kick <- struct{}{}
	if err := waitApplyErr(t, s); !store.IsCode(wrap(err, "apply"), store.Full) {
		t.Fatalf("applier error: %v, want Full", err)
	}
	setMaxSize(t, s, 0) // room again
	waitDrained(t, s)
	for _, e := range []*store.Email{good1, good2} {
		if _, err := s.GetEmail(ctx, e.AccountID, e.ID); err != nil {
			t.Fatalf("email %s once applied: %v", e.ID, err)
		}
	}
	if n, _, err := s.AccountStats(ctx, "acct"); err != nil || n != 3 {
		t.Errorf("AccountStats: %d, %v; want 3", n, err)
	}
	got := map[string]bool{}
	timeout := time.After(3 * time.Second)
	for len(got) < 2 {
		select {
		case ev := <-sub.Events():
			got[ev.EmailID] = true
		case <-timeout:
			t.Fatalf("created events after a partly applied batch: got %v; want %s and %s", got, good1.ID, good2.ID)
		}
	}
}

// A log write that fails and cannot be cut back, when the new file that
// would cancel it cannot be made either (here: its names are taken), is
// cancelled in bbolt instead: the next Open does not store the email
// answered as failed.
func TestFailedWriteCancelledInBolt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mailsink.db")
	s, good, size, next := failingLog(t, path)
	// The names of the next files are taken: the cancel cannot be written.
	var blocked []string
	for n := next + 1; n < next+6; n++ {
		p := walPath(path, n)
		if err := os.MkdirAll(filepath.Join(p, "x"), 0o700); err != nil {
			t.Fatal(err)
		}
		blocked = append(blocked, p)
	}
	failed := walEmail(2)
	if err := s.CreateEmails(ctx, &store.Body{}, []*store.Email{failed}); err == nil {
		t.Fatal("create with a failing log write: got nil error")
	}
	// The frame, whole on disk, as after a write that landed and an
	// fdatasync that reported EIO.
	if _, err := good.WriteAt(encodeCreateFrame(nil, next, logOp(failed)), size); err != nil {
		t.Fatal(err)
	}
	_ = good.Close()
	if s.wal.owesCancel() {
		t.Fatal("the cancel is still owed after it was written to bbolt")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range blocked {
		_ = os.RemoveAll(p)
	}
	s = openTemp(t, path)
	if _, err := s.GetEmail(ctx, failed.AccountID, failed.ID); err == nil {
		t.Error("email answered as failed is stored after reopen")
	}
}
