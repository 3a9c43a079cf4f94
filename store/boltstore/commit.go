package boltstore

import (
	"sync"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Group commit. Every commit costs two fdatasyncs and a write of each dirty
// page, whatever it carries, so the writes of concurrent SMTP sessions share
// commits: a write that arrives while a commit is under way waits for it,
// and the next commit carries every write that arrived meanwhile (up to
// maxBatch). A lone writer commits at once. Unlike bbolt's Batch, no write
// waits on a timer, and the size of a batch follows the load: the longer a
// commit takes, the more writes the next one carries.

// committer runs the store's read-write transactions.
type committer struct {
	db       *bolt.DB
	maxBatch int

	mu      sync.Mutex
	queue   []*writeCall
	leading bool // a writer is committing batches
	closed  bool
	idle    sync.Cond // signalled when leading ends
}

// writeCall is one write waiting for a commit.
type writeCall struct {
	fn   func(*bolt.Tx) error
	done chan writeResult
}

// writeResult ends a writeCall: its error, or lead, which makes its writer
// the one that commits the next batch.
type writeResult struct {
	err  error
	lead bool
}

func newCommitter(db *bolt.DB, maxBatch int) *committer {
	c := &committer{db: db, maxBatch: maxBatch}
	c.idle.L = &c.mu
	return c
}

// write runs fn in a read-write transaction that is committed and synced
// when fn returns nil. fn may share the transaction with other writes and
// may run more than once (when another write in its batch fails, the batch
// runs again without it), so it must reset any result it reports.
func (c *committer) write(fn func(*bolt.Tx) error) error {
	call := &writeCall{fn: fn, done: make(chan writeResult, 1)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return berrors.ErrDatabaseNotOpen
	}
	c.queue = append(c.queue, call)
	if c.leading {
		c.mu.Unlock()
		r := <-call.done
		if !r.lead {
			return r.err
		}
		// The writer before handed over: commit the next batch, which
		// holds this call.
	} else {
		c.leading = true
		c.mu.Unlock()
	}
	c.lead()
	return (<-call.done).err
}

// lead commits the queued writes as one batch, answers them, and hands the
// lead to the first writer still queued, if any. Handing over, rather than
// committing until the queue is empty, bounds the wait of the writer that
// leads to one batch of its own.
func (c *committer) lead() {
	c.mu.Lock()
	n := min(len(c.queue), c.maxBatch)
	batch := c.queue[:n:n]
	c.queue = c.queue[n:]
	c.mu.Unlock()

	c.commit(batch)

	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) > 0 {
		c.queue[0].done <- writeResult{lead: true}
		return
	}
	c.queue = nil
	c.leading = false
	c.idle.Broadcast()
}

// commit runs batch in one transaction. A write whose fn fails is answered
// with its error and the rest run again without it, so one bad write (a
// conflict, say) does not fail the others.
func (c *committer) commit(batch []*writeCall) {
	for len(batch) > 0 {
		failed := -1
		err := c.db.Update(func(tx *bolt.Tx) error {
			for i, call := range batch {
				if err := call.fn(tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			// Committed, or the commit itself failed: the same for all.
			for _, call := range batch {
				call.done <- writeResult{err: err}
			}
			return
		}
		batch[failed].done <- writeResult{err: err}
		batch = append(batch[:failed:failed], batch[failed+1:]...)
	}
}

// close refuses new writes and waits for the queued ones to finish.
func (c *committer) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for c.leading {
		c.idle.Wait()
	}
}
