package boltv4

// Applying the log to bbolt, and what is done once creates are applied.

import (
	"errors"
	"os"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/mailsink/mailsink/store"
)

// applyOps writes ops to tx, skipping those whose first email is there
// already (applied before a crash cut the log's clean-up short) or whose
// number a cancel frame voided, and records the last number. Each
// account's totals are written once, for all its ops: two lookups and a put
// fewer per create (BenchmarkApply).
func applyOps(tx *bolt.Tx, ops []walOp, voided spans) error {
	emails := tx.Bucket(bucketEmails)
	sums := map[string]accountTotals{}
	for i := range ops {
		o := ops[i].op
		o.skipped = voided.holds(ops[i].lsn) || emails.Get(o.keys[0]) != nil
		if o.skipped {
			continue
		}
		if err := o.write(tx, 1); err != nil {
			return err
		}
		t := sums[o.emails[0].AccountID]
		t.emails += int64(len(o.emails))
		t.rawBytes += o.rawBytes
		sums[o.emails[0].AccountID] = t
	}
	for accountID, t := range sums {
		if err := addStats(tx, accountID, t.emails, t.rawBytes); err != nil {
			return err
		}
	}
	return writeApplied(tx, ops[len(ops)-1].lsn)
}

// accountTotals is what a transaction adds to an account's totals.
type accountTotals struct{ emails, rawBytes int64 }

// applyLoop applies what is logged to bbolt until stop, then applies the
// rest and returns.
func (s *Store) applyLoop() {
	w := s.wal
	defer close(w.stopped)
	var retry <-chan time.Time
	backoff := 10 * time.Millisecond
	stopping := false
	var last time.Time
	behind := false // the last apply left creates for the next: no gathering
	for {
		urgent := behind
		if !stopping {
			select {
			case <-w.kick:
			case <-w.urgent:
				urgent = true
			case <-retry:
			case <-w.stop:
				stopping = true
			}
		}
		retry = nil
		if !stopping && !urgent && !w.gather(last) {
			stopping = true
		}
		last = time.Now()
		w.mu.Lock()
		n, emails := 0, 0
		for n < len(w.pending) && (n == 0 || emails+len(w.pending[n].op.emails) <= walApplyBatch) {
			emails += len(w.pending[n].op.emails)
			n++
		}
		ops := slices.Clone(w.pending[:n])
		behind = n < len(w.pending)
		w.mu.Unlock()
		if len(ops) == 0 {
			w.removeApplied()
			if stopping {
				return
			}
			continue
		}
		err := s.write(func(tx *bolt.Tx) error { return applyOps(tx, ops, nil) })
		if err != nil && permanent(err) {
			// The creates applyEach commits before a failure that may
			// pass are done: their events go out now, or never would.
			n, eachErr := s.applyEach(ops)
			if n > 0 {
				s.finishApply(ops[:n])
			}
			ops, err = ops[n:], eachErr
		}
		if err != nil {
			w.mu.Lock()
			w.applyErr = err
			w.broadcast()
			w.mu.Unlock()
			if stopping {
				return // the log keeps them for the next Open
			}
			retry = time.After(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 10 * time.Millisecond
		if len(ops) > 0 {
			s.finishApply(ops)
		}
		w.mu.Lock()
		more := len(w.pending) > 0
		w.mu.Unlock()
		w.removeApplied()
		if more && !stopping {
			signal(w.kick)
		}
	}
}

// gather lets creates gather until w.every (walApplyEvery) after the last
// commit began, so that one commit (two fdatasyncs, each page its creates
// touch written once) carries many: until w.soonEvery when a create's events
// are listened for, at once when someone waits. It reports false when the
// store stops meanwhile.
func (w *walLog) gather(last time.Time) bool {
	every := w.every
	for {
		select {
		case <-w.soon:
			every = min(every, w.soonEvery)
		default:
		}
		wait := every - time.Since(last)
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-w.soon:
			every = min(every, w.soonEvery)
		case <-w.urgent:
			t.Stop()
			return true
		case <-w.stop:
			t.Stop()
			return false
		}
		t.Stop()
	}
}

// signal wakes the receiver of ch, a channel of one slot, unless a wake-up
// is pending already.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// permanent reports whether an apply failed for a reason that another try
// would meet again (a key bbolt refuses, say), unlike a full disk.
func permanent(err error) bool {
	return store.IsCode(err, store.Conflict) || store.IsCode(err, store.TooLarge) || store.IsCode(err, store.Invalid) ||
		errors.Is(err, berrors.ErrKeyTooLarge) || errors.Is(err, berrors.ErrValueTooLarge) || errors.Is(err, berrors.ErrKeyRequired)
}

// applyEach applies ops one transaction each, after their shared one failed
// for good: a create that bbolt refuses for good (which fits and the checks
// before logging should have stopped) is set aside, marked skipped, rather
// than holding up every create after it for ever. It returns how many of ops
// it got through, committed or set aside, and the failure that stopped it, one
// that another try may not meet.
func (s *Store) applyEach(ops []walOp) (int, error) {
	for i := range ops {
		err := s.write(func(tx *bolt.Tx) error { return applyOps(tx, ops[i:i+1], nil) })
		switch {
		case err == nil:
		case permanent(err):
			ops[i].op.skipped = true
		default:
			return i, err
		}
	}
	return len(ops), nil
}

// finishApply publishes the events of ops, just committed in log order, and
// takes them out of pending.
func (s *Store) finishApply(ops []walOp) {
	w := s.wal
	for _, o := range ops {
		if o.op.skipped {
			continue
		}
		for i, e := range o.op.emails {
			s.publish(o.op.firstEvent+uint64(i), store.EmailCreated, e.AccountID, e.ID, e)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range ops {
		for _, k := range o.op.keys {
			delete(w.byKey, string(k))
		}
		w.pendingRaw -= int64(len(o.op.body))
		w.nPending -= len(o.op.keys)
		a := o.op.emails[0].AccountID
		if w.byAccount[a] -= len(o.op.keys); w.byAccount[a] <= 0 {
			delete(w.byAccount, a)
		}
	}
	w.pending = slices.Delete(w.pending, 0, len(ops))
	w.applied = ops[len(ops)-1].lsn
	w.applyErr = nil
	w.broadcast()
}

// broadcast wakes everyone waiting on changed; w.mu must be held.
func (w *walLog) broadcast() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// removeApplied removes the closed log files whose creates are all applied.
func (w *walLog) removeApplied() {
	w.mu.Lock()
	var done []walFile
	for len(w.files) > 0 && w.files[0].last <= w.applied {
		done = append(done, w.files[0])
		w.files = w.files[1:]
	}
	w.mu.Unlock()
	for _, f := range done {
		_ = os.Remove(f.path)
	}
}
