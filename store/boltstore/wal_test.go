package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mailsink/mailsink/internal/rawzip"
	"github.com/mailsink/mailsink/store"
)

func walEmail(i int) *store.Email {
	e := testEmail(fmt.Sprintf("0190b6d2-7c3e-7a1b-8c2d-%012d", i), fmt.Sprintf("r%d@example.com", i), int64(1000+i))
	e.RawSize = int64(10 * i)
	return e
}

// holdWriter takes bbolt's write lock until the test calls the function it
// returns, so that the applier cannot apply what is logged meanwhile.
func holdWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	held, done := make(chan struct{}), make(chan struct{})
	go func() {
		_ = s.db.Update(func(*bolt.Tx) error {
			close(held)
			<-done
			return nil
		})
	}()
	<-held
	released := false
	release = func() {
		if !released {
			released = true
			close(done)
		}
	}
	t.Cleanup(release)
	return release
}

// TestLoggedNotApplied checks what a create answered from the log but not
// yet in bbolt looks like to every read and write: found by id with its
// body, counted in the account's totals, a list it would be in waits for it,
// a list it would not be in does not, and an update waits and applies.
func TestLoggedNotApplied(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTemp(t, filepath.Join(t.TempDir(), "mailsink.db"))
	old := walEmail(1)
	if err := s.CreateEmails(ctx, &store.Body{Raw: []byte("old")}, []*store.Email{old}); err != nil {
		t.Fatal(err)
	}
	if err := s.wal.settleAll(ctx); err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, s)
	e := walEmail(2)
	if err := s.CreateEmails(ctx, &store.Body{Raw: []byte("new raw")}, []*store.Email{e}); err != nil {
		t.Fatal(err)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketEmails).Get(emailKey(e.AccountID, e.ID)) != nil {
			return errors.New("bbolt has the email while its writer lock is held")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetEmail(ctx, e.AccountID, e.ID)
	if err != nil || got.Recipient != e.Recipient || got.RawSize != e.RawSize {
		t.Fatalf("GetEmail of a logged email: %+v, %v", got, err)
	}
	body, err := s.GetBody(ctx, e.AccountID, e.ID)
	if err != nil || string(body.Raw) != "new raw" {
		t.Fatalf("GetBody of a logged email: %v, %v", body, err)
	}
	if n, b, err := s.AccountStats(ctx, e.AccountID); err != nil || n != 2 || b != old.RawSize+e.RawSize {
		t.Fatalf("AccountStats with a logged email: %d, %d, %v; want 2, %d", n, b, err, old.RawSize+e.RawSize)
	}
	// A list the logged email is not in answers at once.
	page, err := s.ListEmails(ctx, store.ListQuery{AccountID: e.AccountID, Recipient: old.Recipient, Limit: 10})
	if err != nil || len(page) != 1 || page[0].ID != old.ID {
		t.Fatalf("list of another recipient while one is logged: %v, %v", page, err)
	}
	// A first page it is in holds it at once, in its place, and the
	// counts count it.
	for _, q := range []store.ListQuery{
		{AccountID: e.AccountID, Recipient: e.Recipient, Limit: 10},
		{AccountID: e.AccountID, Limit: 10},
		{AccountID: e.AccountID, Limit: 1},
		{AccountID: e.AccountID, Limit: 10, Since: old.ReceivedAt},
	} {
		page, err := s.ListEmails(ctx, q)
		if err != nil || len(page) == 0 || page[0].ID != e.ID || page[0] == e {
			t.Fatalf("list %+v while the email is logged: %v, %v; want a copy of it first", q, page, err)
		}
		want := int64(len(page))
		if q.Limit == 1 {
			want = 2
		}
		if n, err := s.CountEmails(ctx, q); err != nil || n != want {
			t.Fatalf("count %+v while the email is logged: %d, %v; want %d", q, n, err, want)
		}
	}
	if page, err := s.ListEmails(ctx, store.ListQuery{AccountID: e.AccountID, Limit: 10, Since: e.ReceivedAt}); err != nil || len(page) != 0 {
		t.Fatalf("list since the logged email: %v, %v; want none", page, err)
	}
	// A later page waits for the applier.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := s.ListEmails(short, store.ListQuery{AccountID: e.AccountID, Limit: 10, Offset: 1}); !errors.Is(err, context.DeadlineExceeded) && !store.IsCode(err, store.Unavailable) {
		t.Fatalf("second page while an email is logged, applier held: %v; want it to wait", err)
	}
	listed := make(chan []*store.Email, 1)
	go func() {
		page, err := s.ListEmails(ctx, store.ListQuery{AccountID: e.AccountID, Limit: 10, Offset: 1})
		if err != nil {
			t.Error(err)
		}
		listed <- page
	}()
	updated := make(chan error, 1)
	go func() {
		_, err := s.UpdateEmail(ctx, e.AccountID, e.ID, store.Update{Labels: &[]string{"seen"}})
		updated <- err
	}()
	release()
	if page := <-listed; len(page) != 1 || page[0].ID != old.ID {
		t.Fatalf("second page once applied: %v; want the old email", page)
	}
	if err := <-updated; err != nil {
		t.Fatalf("update of a logged email: %v", err)
	}
	got, err = s.GetEmail(ctx, e.AccountID, e.ID)
	if err != nil || len(got.Labels) != 1 {
		t.Fatalf("after the update: %+v, %v", got, err)
	}
	// The same id again is a conflict, logged or applied.
	if err := s.CreateEmails(ctx, &store.Body{}, []*store.Email{walEmail(2)}); !store.IsCode(err, store.Conflict) {
		t.Fatalf("create of an applied id: %v, want Conflict", err)
	}
	release = holdWriter(t, s)
	if err := s.CreateEmails(ctx, &store.Body{}, []*store.Email{walEmail(3)}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateEmails(ctx, &store.Body{}, []*store.Email{walEmail(3)}); !store.IsCode(err, store.Conflict) {
		t.Fatalf("create of a logged id: %v, want Conflict", err)
	}
	release()
}

// writeLog writes frames to a log file beside path, as a crash would leave
// them.
func writeLog(t *testing.T, path string, first uint64, frames []byte) {
	t.Helper()
	if err := os.WriteFile(walPath(path, first), frames, 0o600); err != nil {
		t.Fatal(err)
	}
}

func logOp(emails ...*store.Email) *createOp {
	return newCreateOp(new(rawzip.Compressor), &store.Body{Raw: []byte("raw of " + emails[0].ID)}, emails)
}

// TestReplay checks what Open makes of log files: creates above the applied
// number are applied once, a cancelled number is not, a torn last frame
// ends its file (the next file is still read), and the files are removed.
func TestReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mailsink.db")
	s := openTemp(t, path)
	if err := s.CreateEmails(ctx, &store.Body{Raw: []byte("one")}, []*store.Email{walEmail(1)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if files, _ := walFiles(path); len(files) != 0 {
		t.Fatalf("log files after Close: %v", files)
	}
	var applied uint64
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *bolt.Tx) error { applied = readApplied(tx); return nil })
	_ = db.Close()
	if applied == 0 {
		t.Fatal("no applied number after a create")
	}

	// File 1: the applied number again (skipped), then emails 2, 3
	// (cancelled by file 2), 4 and 5 (one body), and a torn frame (6).
	a := applied
	var f1 []byte
	f1 = encodeCreateFrame(f1, a, logOp(walEmail(10)))
	f1 = encodeCreateFrame(f1, a+1, logOp(walEmail(2)))
	f1 = encodeCreateFrame(f1, a+2, logOp(walEmail(3)))
	f1 = encodeCreateFrame(f1, a+3, logOp(walEmail(4), walEmail(5)))
	torn := encodeCreateFrame(nil, a+4, logOp(walEmail(6)))
	f1 = append(f1, torn[:len(torn)-3]...)
	writeLog(t, path, a-1, f1)
	f2 := encodeCancelFrame(nil, a+2, a+2)
	f2 = encodeCreateFrame(f2, a+6, logOp(walEmail(7)))
	f2 = append(f2, make([]byte, 4096)...) // a spare file's zeros
	writeLog(t, path, a+5, f2)

	s = openTemp(t, path)
	for i, want := range map[int]bool{1: true, 2: true, 3: false, 4: true, 5: true, 6: false, 7: true, 10: false} {
		e := walEmail(i)
		_, err := s.GetEmail(ctx, e.AccountID, e.ID)
		if got := err == nil; got != want {
			t.Errorf("email %d after replay: found %v (%v), want %v", i, got, err, want)
		}
	}
	if body, err := s.GetBody(ctx, "acct", walEmail(5).ID); err != nil || string(body.Raw) != "raw of "+walEmail(4).ID {
		t.Errorf("shared body after replay: %v, %v", body, err)
	}
	if n, _, err := s.AccountStats(ctx, "acct"); err != nil || n != 5 {
		t.Errorf("AccountStats after replay: %d, %v; want 5", n, err)
	}
	// Numbers go on after the highest in the files.
	if err := s.CreateEmails(ctx, &store.Body{}, []*store.Email{walEmail(8)}); err != nil {
		t.Fatal(err)
	}
	if err := s.wal.settleAll(ctx); err != nil {
		t.Fatal(err)
	}
	_ = s.db.View(func(tx *bolt.Tx) error { applied = readApplied(tx); return nil })
	if applied <= a+6 {
		t.Errorf("applied number after the next create: %d, want above %d", applied, a+6)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if files, _ := walFiles(path); len(files) != 0 {
		t.Errorf("log files once all is applied and closed: %v", files)
	}
}

// TestReplayCorruptFrame checks that a frame whose checksum holds but whose
// content is not a create fails Open with a message naming the file, rather
// than dropping what follows.
func TestReplayCorruptFrame(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "mailsink.db")
	frame := sealFrame(append(make([]byte, 8), 9, 1), 0)
	writeLog(t, path, 1, frame)
	if s, err := Open(path); err == nil {
		s.Close()
		t.Fatal("Open with a corrupt log frame: got nil error")
	} else if !strings.Contains(err.Error(), walPath(path, 1)) {
		t.Fatalf("Open with a corrupt log frame: %v; want the error to name the log file", err)
	}
}

// FuzzReadFrames feeds the log reader arbitrary file contents: it must
// return what checks out or an error, never panic or hang.
func FuzzReadFrames(f *testing.F) {
	f.Add(encodeCreateFrame(nil, 1, logOp(walEmail(1), walEmail(2))))
	f.Add(encodeCancelFrame(encodeCreateFrame(nil, 2, logOp(walEmail(3))), 2, 2))
	f.Add(encodeCancelFrame(nil, 0, ^uint64(0)))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = readFrames(data, func(kind byte, lsn uint64, f decodedFrame) error {
			if kind == frameCreate && (f.create == nil || len(f.create.keys) != len(f.create.emails)) {
				t.Fatalf("create frame %d without its emails' keys", lsn)
			}
			return nil
		})
	})
}

// TestLogWriteFails checks a log write that fails and cannot be cut back:
// the create fails, the next one goes to a new file that cancels the
// failed numbers, and after a reopen only the answered emails are there.
func TestLogWriteFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mailsink.db")
	s, good, _, _ := failingLog(t, path)
	ro := s.wal.file
	if err := s.CreateEmails(ctx, &store.Body{}, []*store.Email{walEmail(2)}); err == nil {
		t.Fatal("create with a failing log write: got nil error")
	}
	// Before the failure was answered, a new file cancelled its numbers.
	if s.wal.file == nil || s.wal.file == ro || len(s.wal.voided) != 0 {
		t.Fatalf("after the failed write: file %v, voided %v; want a new file that cancels the failed numbers", s.wal.file, s.wal.voided)
	}
	_ = good.Close()
	if err := s.CreateEmails(ctx, &store.Body{}, []*store.Email{walEmail(3)}); err != nil {
		t.Fatalf("create after a failed log write: %v", err)
	}
	files, _ := walFiles(path)
	data, err := os.ReadFile(files[len(files)-1])
	if err != nil {
		t.Fatal(err)
	}
	var kinds []byte
	_ = readFrames(data, func(kind byte, _ uint64, _ decodedFrame) error { kinds = append(kinds, kind); return nil })
	if string(kinds) != string([]byte{frameCancel, frameCreate}) {
		t.Fatalf("frames of the new file: %v, want a cancel then the create", kinds)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, path)
	for i, want := range map[int]bool{1: true, 2: false, 3: true} {
		e := walEmail(i)
		if _, err := s.GetEmail(ctx, e.AccountID, e.ID); (err == nil) != want {
			t.Errorf("email %d after reopen: %v, want found %v", i, err, want)
		}
	}
}

// TestSpareFile checks that the log moves on to a zero-filled spare file
// once one is ready, and that a reopen reads it up to its zeros.
func TestSpareFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mailsink.db")
	s := openTemp(t, path)
	i := 0
	create := func() {
		t.Helper()
		i++
		if err := s.CreateEmails(ctx, &store.Body{Raw: []byte("x")}, []*store.Email{walEmail(i)}); err != nil {
			t.Fatal(err)
		}
	}
	create()
	if s.wal.filled {
		t.Fatal("the first file of a process is a spare: none can be ready yet")
	}
	s.wal.spareWG.Wait() // the spare is filled
	create()
	if !s.wal.filled {
		t.Fatal("the log did not move on to the spare once it was ready")
	}
	info, err := s.wal.file.Stat()
	if err != nil || info.Size() != walSegmentSize {
		t.Fatalf("the spare file: %v, %v; want %d bytes", info, err, walSegmentSize)
	}
	create()
	// A crash: the files stay as they are; another Open reads them.
	files, _ := walFiles(path)
	saved := map[string][]byte{}
	for _, f := range files {
		saved[f], _ = os.ReadFile(f)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Back to before the applies of the spare file's emails (2 and on;
	// the first file is gone once applied): they exist only in the file.
	err = db.Update(func(tx *bolt.Tx) error {
		for n := 2; n <= i; n++ {
			if err := tx.Bucket(bucketEmails).Delete(emailKey("acct", walEmail(n).ID)); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(metaWAL, make([]byte, 8))
	})
	_ = db.Close()
	if err != nil {
		t.Fatal(err)
	}
	for f, data := range saved {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s = openTemp(t, path)
	for n := 2; n <= i; n++ {
		if _, err := s.GetEmail(ctx, "acct", walEmail(n).ID); err != nil {
			t.Errorf("email %d after a replay of the spare file: %v", n, err)
		}
	}
}

// failingLog opens a store at path, logs one email (walEmail(1)), and makes
// its log writes fail from then on, as on a failing disk: the store stays on
// its current file and writes it through a read-only handle, so writing and
// cutting back fail. No batch runs between the test's creates. It returns the
// file's writable handle, and the offset and number the next frame takes.
func failingLog(t *testing.T, path string) (s *Store, good *os.File, size int64, next uint64) {
	t.Helper()
	s = openTemp(t, path)
	if err := s.CreateEmails(context.Background(), &store.Body{}, []*store.Email{walEmail(1)}); err != nil {
		t.Fatal(err)
	}
	s.wal.spareWG.Wait()
	s.wal.filled = true // stay on this file, spare or not
	ro, err := os.Open(s.wal.file.Name())
	if err != nil {
		t.Fatal(err)
	}
	good, size, next = s.wal.file, s.wal.size, s.wal.nextLSN
	s.wal.file = ro
	t.Cleanup(func() { good.Close() })
	return s, good, size, next
}
