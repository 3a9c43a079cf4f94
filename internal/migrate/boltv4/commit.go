package boltv4

import (
	"fmt"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/mailsink/mailsink/internal/batch"
)

// Group commit. Every commit costs two fdatasyncs and a write of each dirty
// page, whatever it carries, so the writes of concurrent SMTP sessions share
// commits (internal/batch): a write that arrives while a commit is under
// way shares the next one with every write that arrived meanwhile. Unlike
// bbolt's Batch, no write waits on a timer.

// writeCall is one write waiting for a commit.
type writeCall struct {
	fn  func(*bolt.Tx) error
	err error
}

// committer runs the store's read-write transactions in group commits.
type committer struct {
	db      *bolt.DB
	batches *batch.Batcher[*writeCall]
	// commits counts the transactions committed, for the tests that
	// measure the pages written per commit.
	commits atomic.Int64
}

func newCommitter(db *bolt.DB, maxBatch int) *committer {
	c := &committer{db: db}
	c.batches = batch.New(maxBatch, c.commit)
	return c
}

// write runs fn in a read-write transaction that is committed and synced
// when fn returns nil. fn may share the transaction with other writes and
// may run more than once (when another write in its batch fails, the batch
// runs again without it), so it must reset any result it reports.
func (c *committer) write(fn func(*bolt.Tx) error) error {
	call := &writeCall{fn: fn}
	if !c.batches.Do(call) {
		return berrors.ErrDatabaseNotOpen
	}
	return call.err
}

// commit runs calls in one transaction. A write whose fn fails gets its
// error and the rest run again without it, so one bad write (a conflict,
// say) does not fail the others.
func (c *committer) commit(calls []*writeCall) {
	for len(calls) > 0 {
		failed := -1
		err := c.db.Update(func(tx *bolt.Tx) error {
			for i, call := range calls {
				if err := runWrite(call.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			if err == nil {
				c.commits.Add(1)
			}
			// Committed, or the commit itself failed: the same for all.
			for _, call := range calls {
				call.err = err
			}
			return
		}
		calls[failed].err = err
		calls = append(calls[:failed:failed], calls[failed+1:]...)
	}
}

// runWrite runs fn in tx and turns a panic into an error, so that one
// faulty write fails alone, as with any other error, instead of leaving the
// writes that share its batch without an answer.
func runWrite(fn func(*bolt.Tx) error, tx *bolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("boltv4: write panicked: %v", p)
		}
	}()
	return fn(tx)
}

// close refuses new writes and waits for the queued ones to finish.
func (c *committer) close() { c.batches.Close() }
