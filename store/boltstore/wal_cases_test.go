package boltstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/rawzip"
	"github.com/mailsink/mailsink/store"
)

// A create bbolt would refuse (an index key over its 32 KiB limit) is
// refused before it is logged, with TooLarge as before the log: logged, it
// could never be applied, and the applier would hold up every create after
// it (and the next Open).
func TestKeyTooLarge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mailsink.db")
	s := openTemp(t, path)
	big := walEmail(1)
	big.Recipient = strings.Repeat("a", 40<<10) + "@example.com"
	if err := s.CreateEmails(ctx, &store.Body{Raw: []byte("x")}, []*store.Email{big}); !store.IsCode(err, store.TooLarge) {
		t.Fatalf("create with a 40 KiB recipient: %v, want TooLarge", err)
	}
	if err := s.CreateEmails(ctx, &store.Body{Raw: []byte("y")}, []*store.Email{walEmail(2)}); err != nil {
		t.Fatalf("a create after it: %v", err)
	}
	if page, err := s.ListEmails(ctx, store.ListQuery{AccountID: "acct", Limit: 10}); err != nil || len(page) != 1 {
		t.Fatalf("a list after it: %v, %v", page, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	openTemp(t, path)
}

// A create that fails for good when applied (here: its id is in bbolt
// already, which the checks before logging rule out) is set aside; the
// creates after it are applied.
func TestApplierSetsAsideAFailedCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTemp(t, filepath.Join(t.TempDir(), "mailsink.db"))
	if err := s.CreateEmails(ctx, &store.Body{}, []*store.Email{walEmail(1)}); err != nil {
		t.Fatal(err)
	}
	if err := s.wal.settleAll(ctx); err != nil {
		t.Fatal(err)
	}
	// Two emails, the second of which bbolt has: apply finds the first
	// missing, so it does not skip the create, and fails with Conflict.
	release := holdWriter(t, s)
	bad := logOp(walEmail(3), walEmail(1))
	s.wal.mu.Lock()
	s.wal.addPending(walOp{lsn: s.wal.nextLSN, op: bad})
	s.wal.nextLSN++
	s.wal.mu.Unlock()
	if err := s.CreateEmails(ctx, &store.Body{}, []*store.Email{walEmail(2)}); err != nil {
		t.Fatal(err)
	}
	release()
	if err := s.wal.settleAll(ctx); err != nil {
		t.Fatalf("the applier after a create that cannot be applied: %v", err)
	}
	if _, err := s.GetEmail(ctx, "acct", walEmail(2).ID); err != nil {
		t.Errorf("the create after it: %v", err)
	}
	if n, _, err := s.AccountStats(ctx, "acct"); err != nil || n != 2 {
		t.Errorf("AccountStats: %d, %v; want 2 (the failed create set aside whole)", n, err)
	}
}

// A logged email created with nil Labels has [] as Labels, as a stored one
// has, before and after it is applied.
func TestPendingLabelsNotNil(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTemp(t, filepath.Join(t.TempDir(), "mailsink.db"))
	e := walEmail(1)
	e.Labels = nil
	release := holdWriter(t, s)
	if err := s.CreateEmails(ctx, &store.Body{Raw: []byte("x")}, []*store.Email{e}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetEmail(ctx, e.AccountID, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if err := s.wal.settleAll(ctx); err != nil {
		t.Fatal(err)
	}
	applied, err := s.GetEmail(ctx, e.AccountID, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels == nil || applied.Labels == nil {
		t.Errorf("Labels: pending %#v, applied %#v; want non-nil both (as after apply)", got.Labels, applied.Labels)
	}
}

// A log write whose data reached the file but whose sync failed, and that
// could not be cut back, is answered as failed only once a new file cancels
// its numbers: when no create follows before Close (or a kill), the next
// Open must not store the email answered as failed.
func TestFailedWriteNotReplayed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mailsink.db")
	s, good, size, next := failingLog(t, path)
	failed := walEmail(2)
	if err := s.CreateEmails(ctx, &store.Body{}, []*store.Email{failed}); err == nil {
		t.Fatal("create with a failing log write: got nil error")
	}
	// What the disk may hold after write() succeeded and fdatasync
	// reported EIO: the frame, whole, where the write put it.
	frame := encodeCreateFrame(nil, next, logOp(failed))
	if _, err := good.WriteAt(frame, size); err != nil {
		t.Fatal(err)
	}
	_ = good.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, path)
	if _, err := s.GetEmail(ctx, failed.AccountID, failed.ID); err == nil {
		t.Errorf("email answered as failed is stored after reopen")
	}
}

// Read-your-writes and exact totals under concurrent creates: each writer
// owns an account, so after its n-th create returns every read of that
// account must show exactly n, whether the applier has them or not.
func TestReadYourWritesConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTemp(t, filepath.Join(t.TempDir(), "mailsink.db"))
	const writers, per = 4, 150
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		go func() {
			acct := "acct" + string(rune('a'+w))
			var err error
			defer func() { errs <- err }()
			for i := 1; i <= per; i++ {
				e := walEmail(w*1000 + i)
				e.AccountID = acct
				if err = s.CreateEmails(ctx, &store.Body{Raw: []byte("x")}, []*store.Email{e}); err != nil {
					return
				}
				var n, raw int64
				if n, raw, err = s.AccountStats(ctx, acct); err != nil {
					return
				}
				_ = raw
				if n != int64(i) {
					err = fmt.Errorf("%s after create %d: AccountStats %d", acct, i, n)
					return
				}
				if _, err = s.GetEmail(ctx, acct, e.ID); err != nil {
					err = fmt.Errorf("%s get %d: %v", acct, i, err)
					return
				}
				if _, err = s.GetBody(ctx, acct, e.ID); err != nil {
					err = fmt.Errorf("%s body %d: %v", acct, i, err)
					return
				}
				var c int64
				if c, err = s.CountEmails(ctx, store.ListQuery{AccountID: acct}); err != nil || c != int64(i) {
					err = fmt.Errorf("%s count after %d: %d %v", acct, i, c, err)
					return
				}
				var l []*store.Email
				if l, err = s.ListEmails(ctx, store.ListQuery{AccountID: acct, Limit: 1000}); err != nil || len(l) != i {
					err = fmt.Errorf("%s list after %d: %d %v", acct, i, len(l), err)
					return
				}
				if _, err = s.ListEmails(ctx, store.ListQuery{AccountID: acct, Limit: 10, Before: e.ID}); err != nil {
					err = fmt.Errorf("%s list before %d: %v", acct, i, err)
					return
				}
			}
		}()
	}
	for w := 0; w < writers; w++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// A full disk: bbolt cannot grow (withMaxSize stands in for ENOSPC) while
// the log, whose spare file is filled in advance, still takes creates for a
// moment. Those cannot be applied; reads must still answer (retention's
// OldestEmails picks what to delete to free space), and creates are refused
// with Full until there is room, then the applier catches up by itself.
func TestFullDiskReadsAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mailsink.db")
	s := openTemp(t, path)
	body := &store.Body{Raw: []byte(strings.Repeat("x", 8<<10))}
	n := 0
	create := func() error {
		n++
		return s.CreateEmails(ctx, body, []*store.Email{walEmail(n)})
	}
	for range 100 {
		if err := create(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.wal.settleAll(ctx); err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(path)
	s.db.MaxSize = int(info.Size()) // the disk is full
	var full error
	for i := 0; i < 2000 && full == nil; i++ {
		full = create()
		_ = s.wal.settleAll(ctx)
	}
	if !store.IsCode(full, store.Full) {
		t.Fatalf("creates on a full disk: %v, want Full", full)
	}
	old, err := s.OldestEmails(ctx, "acct", 10, 0, 100)
	if err != nil || len(old) == 0 {
		t.Fatalf("OldestEmails on a full disk: %d, %v", len(old), err)
	}
	if _, err := s.ListEmails(ctx, store.ListQuery{AccountID: "acct", Limit: 10}); err != nil {
		t.Fatalf("a list on a full disk: %v", err)
	}
	s.db.MaxSize = 0 // room again: the applier's next try succeeds
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		s.wal.mu.Lock()
		failing, changed := s.wal.applyErr, s.wal.changed
		s.wal.mu.Unlock()
		if failing == nil {
			break
		}
		select {
		case <-changed:
		case <-wait.Done():
			t.Fatalf("the applier still fails once there is room: %v", failing)
		}
	}
	if err := create(); err != nil {
		t.Fatalf("a create once there is room: %v", err)
	}
	if err := s.wal.settleAll(ctx); err != nil {
		t.Fatalf("once there is room: %v", err)
	}
}

// A log frame that checks out but whose number does not fit its file (the
// top of the range here, which would wrap the next number around) is a
// corrupt file: Open refuses it, naming the file, rather than guess.
func TestReplayNumberOutOfPlace(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "mailsink.db")
	writeLog(t, path, 1, encodeCreateFrame(nil, ^uint64(0), logOp(walEmail(1))))
	s, err := Open(path)
	if err == nil {
		s.Close()
		t.Fatal("Open of a log frame numbered 2^64-1: got nil error")
	}
	if !strings.Contains(err.Error(), walPath(path, 1)) || !strings.Contains(err.Error(), "out of place") {
		t.Fatalf("Open of a log frame numbered 2^64-1: %v; want an error naming the file", err)
	}
}

// Open, creates (log, rotation to a spare, applier), reads that wait, and
// Close leave no goroutine behind.
func TestNoGoroutineLeak(t *testing.T) {
	ctx := context.Background()
	before := runtime.NumGoroutine()
	for round := 0; round < 3; round++ {
		s, err := Open(filepath.Join(t.TempDir(), "mailsink.db"))
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 20; i++ {
			if err := s.CreateEmails(ctx, &store.Body{Raw: []byte("x")}, []*store.Email{walEmail(i)}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.ListEmails(ctx, store.ListQuery{AccountID: "acct", Limit: 5}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("goroutines: %d before, %d after three Open/Close rounds", before, after)
	}
}

// withMaxSize stands in for a full disk: the file may not grow past n.
func withMaxSize(n int) Option { return func(o *options) { o.maxSize = n } }

// On a full disk a store whose log holds creates still opens: they stay
// pending (reads find them, lists do not wait for them) until there is room.
func TestOpenOnFullDisk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mailsink.db")
	s := openTemp(t, path)
	if err := s.CreateEmails(ctx, &store.Body{Raw: []byte("x")}, []*store.Email{walEmail(100)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var frames []byte
	for i := 1; i <= 50; i++ {
		frames = encodeCreateFrame(frames, uint64(1000+i), newCreateOp(new(rawzip.Compressor), &store.Body{Raw: []byte(strings.Repeat("y", 8<<10))}, []*store.Email{walEmail(i)}))
	}
	writeLog(t, path, 1000, frames)
	info, _ := os.Stat(path)
	s, err := Open(path, withMaxSize(int(info.Size())))
	if err != nil {
		t.Fatalf("Open on a full disk with creates in the log: %v", err)
	}
	if _, err := s.GetEmail(ctx, "acct", walEmail(7).ID); err != nil {
		t.Errorf("a logged email on a full disk: %v", err)
	}
	page, err := s.ListEmails(ctx, store.ListQuery{AccountID: "acct", Recipient: walEmail(100).Recipient, Limit: 10})
	if err != nil || len(page) != 1 {
		t.Errorf("a list on a full disk: %v, %v", page, err)
	}
	if err := s.Close(); err == nil {
		t.Error("Close with creates that could not be applied: got nil error, want one saying they stay in the log")
	}
	s = openTemp(t, path)
	if err := s.wal.settleAll(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _, err := s.AccountStats(ctx, "acct"); err != nil || n != 51 {
		t.Errorf("once there is room: %d emails, %v; want 51", n, err)
	}
}

// After CreateEmails returns, EventsAfter of its account holds the create's
// event, even while updates of another account share commits with the
// applier and publish the events numbered before it on their own.
func TestEventsAfterHoldsCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTemp(t, filepath.Join(t.TempDir(), "mailsink.db"))
	other := walEmail(9999)
	other.AccountID = "other"
	if err := s.CreateEmails(ctx, &store.Body{}, []*store.Email{other}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := fmt.Sprint(i)
				_, _ = s.UpdateEmail(ctx, "other", other.ID, store.Update{Notes: &store.Nullable{Value: &n}})
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	sub := s.Subscribe("acct")
	if err := s.CreateEmails(ctx, &store.Body{}, []*store.Email{walEmail(1000)}); err != nil {
		t.Fatal(err)
	}
	after := (<-sub.Events()).ID
	sub.Close()
	for i := 1; i <= 300; i++ {
		e := walEmail(i)
		if err := s.CreateEmails(ctx, &store.Body{}, []*store.Email{e}); err != nil {
			t.Fatal(err)
		}
		evs, _, err := s.EventsAfter(ctx, "acct", after)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, ev := range evs {
			found = found || ev.EmailID == e.ID && ev.Type == store.EmailCreated
		}
		if len(evs) > 0 {
			after = evs[len(evs)-1].ID
		}
		if !found {
			t.Fatalf("create %d: EventsAfter right after it lacks its event (%d events)", i, len(evs))
		}
	}
}

func withApplyTimes(every, soon time.Duration) Option {
	return func(o *options) { o.applyEvery, o.applySoon = every, soon }
}

// TestApplierGathersUnlessListened checks when the applier cuts its
// gathering short, with a gathering time no test would wait for: a create
// whose account someone listens to is applied (and its event published)
// after the short time, and a read that needs a pending create kicks the
// applier at once. Unlistened creates stay pending meanwhile.
func TestApplierGathersUnlessListened(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openTemp(t, filepath.Join(t.TempDir(), "mailsink.db"), withApplyTimes(time.Hour, time.Millisecond))

	quiet := walEmail(1)
	quiet.AccountID = "quiet"
	if err := s.CreateEmails(ctx, &store.Body{Raw: []byte("q")}, []*store.Email{quiet}); err != nil {
		t.Fatal(err)
	}
	sub := s.Subscribe("acct")
	defer sub.Close()
	heard := walEmail(2)
	if err := s.CreateEmails(ctx, &store.Body{Raw: []byte("h")}, []*store.Email{heard}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-sub.Events():
		if ev.EmailID != heard.ID || ev.Type != store.EmailCreated {
			t.Fatalf("event %+v, want the creation of %s", ev, heard.ID)
		}
	case <-ctx.Done():
		t.Fatal("a listened create's event did not come within 30s (the applier gathered for an hour)")
	}

	late := walEmail(3)
	late.AccountID = "quiet"
	if err := s.CreateEmails(ctx, &store.Body{Raw: []byte("l")}, []*store.Email{late}); err != nil {
		t.Fatal(err)
	}
	if len(s.wal.pendingOf("quiet")) == 0 {
		t.Fatal("an unlistened create was applied at once; the applier should gather")
	}
	evs, _, err := s.EventsAfter(ctx, "quiet", "0-0")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].EmailID != quiet.ID || evs[1].EmailID != late.ID {
		t.Fatalf("EventsAfter on the quiet account: %+v, want the creations of %s and %s", evs, quiet.ID, late.ID)
	}
}

// withMaxPending sets the bound on emails logged but not applied.
func withMaxPending(n int) Option {
	return func(o *options) { o.maxPending = n }
}

// TestPendingBoundCountsEmails checks that the bound on what is logged but
// not applied counts emails, not creates, and that a create waiting for
// room has the applier stop gathering: with a bound of 10 and an hour of
// gathering, a create of 12 recipients is admitted (the bound was not
// reached) and the next one returns only once those 12 are applied.
func TestPendingBoundCountsEmails(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openTemp(t, filepath.Join(t.TempDir(), "mailsink.db"), withApplyTimes(time.Hour, time.Hour), withMaxPending(10))
	// Let the applier take the wake-up Open gives it, which would apply
	// the first create below at once: after this it gathers.
	if err := s.CreateEmails(ctx, &store.Body{Raw: []byte("w")}, []*store.Email{walEmail(99)}); err != nil {
		t.Fatal(err)
	}
	if err := s.wal.settleAll(ctx); err != nil {
		t.Fatal(err)
	}
	var many []*store.Email
	for i := range 12 {
		many = append(many, walEmail(i+1))
	}
	if err := s.CreateEmails(ctx, &store.Body{Raw: []byte("m")}, many); err != nil {
		t.Fatal(err)
	}
	if p := s.wal.pendingOf("acct"); len(p) != 1 {
		t.Fatalf("%d creates pending after the first, want 1 (the applier gathers for an hour)", len(p))
	}
	if err := s.CreateEmails(ctx, &store.Body{Raw: []byte("n")}, []*store.Email{walEmail(13)}); err != nil {
		t.Fatalf("the create after a full log: %v (it should wait for the applier, and the applier not gather)", err)
	}
	p := s.wal.pendingOf("acct")
	if len(p) > 1 || len(p) == 1 && len(p[0].op.emails) != 1 {
		t.Fatalf("the 12 emails of the first create were still pending when the next create returned")
	}
	for _, e := range append(many, walEmail(13)) {
		if _, err := s.GetEmail(ctx, "acct", e.ID); err != nil {
			t.Fatalf("email %s: %v", e.ID, err)
		}
	}
}

// TestApplierCatchesUpWithoutGathering checks that a backlog of more than
// one apply's worth of creates is applied batch after batch, without the
// gathering time between them: with an hour of it, a backlog built while
// the applier could not write is all applied once it can, though only the
// first batch's creates asked for it.
func TestApplierCatchesUpWithoutGathering(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openTemp(t, filepath.Join(t.TempDir(), "mailsink.db"), withApplyTimes(time.Hour, time.Millisecond))
	sub := s.Subscribe("acct")
	defer sub.Close()
	release := holdWriter(t, s)
	n := 2*walApplyBatch + walApplyBatch/2
	for i := range n {
		if err := s.CreateEmails(ctx, &store.Body{Raw: []byte("b")}, []*store.Email{walEmail(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	release()
	w := s.wal
	for {
		w.mu.Lock()
		left, ch := len(w.pending), w.changed
		w.mu.Unlock()
		if left == 0 {
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("%d of %d creates still pending after 30s: the applier gathered between batches", left, n)
		}
	}
}
