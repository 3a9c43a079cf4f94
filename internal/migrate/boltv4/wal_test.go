package boltv4

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mailsink/mailsink/internal/rawzip"
	"github.com/mailsink/mailsink/store"
)

func walEmail(i int) *store.Email {
	e := testEmail(fmt.Sprintf("0190b6d2-7c3e-7a1b-8c2d-%012d", i), fmt.Sprintf("r%d@example.com", i), int64(1000+i))
	e.RawSize = int64(10 * i)
	return e
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
