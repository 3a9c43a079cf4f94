package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/mailsink/mailsink/store"
)

// room keeps creates within the space the store may use: on disk, the free
// space less a reserve that Pebble's flushes and compactions need (a
// flush that finds the disk full stops the process); with a bound
// (WithMaxBytes, OpenInMemory), what the store's files and memtables hold.
// A create that does not fit fails with code Full, so that SMTP answers 452
// and the API 507 while deletes, which write little, go on and give space
// back.
//
// Measuring costs a look at Pebble's metrics and the file system, so it is
// done every measureEvery, and in between what was admitted is counted off
// the last measure.
type room struct {
	s        *Store
	fsys     vfs.FS
	dir      string
	memory   bool
	maxBytes int64
	reserve  int64

	mu       sync.Mutex
	left     int64     // what creates may still add
	measured time.Time // when left was last measured
}

const (
	measureEvery = 100 * time.Millisecond
	// measureFull is how often, at most, a store without room measures
	// again, however many creates it refuses.
	measureFull = 10 * time.Millisecond
)

func newRoom(s *Store, fsys vfs.FS, dir string, memory bool, o options) *room {
	return &room{s: s, fsys: fsys, dir: dir, memory: memory, maxBytes: o.maxBytes, reserve: o.reserve}
}

// admit counts n bytes about to be written against the room, or returns
// an error with code Full when they do not fit.
func (r *room) admit(n int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	since := time.Since(r.measured)
	if since >= measureEvery || r.left < n && since >= measureFull {
		r.measure()
	}
	if r.left < n {
		r.s.reclaim.urge()
		return store.Wrap(store.Full, errors.New("pebblestore: no room for a create"), "store full")
	}
	r.left -= n
	return nil
}

// measure sets left from the store's use and the disk's free space.
func (r *room) measure() {
	left := int64(math.MaxInt64)
	if r.maxBytes > 0 {
		m := r.s.db.Metrics()
		// Spent log files that Pebble keeps to write its next logs into
		// (as many as MemTableStopWritesThreshold+1, each as long as it
		// was: about a memtable, more if it held a large message) hold no
		// mail and do not grow: counted, they kept an emptied 24 MiB store
		// full (TestFullThenRoomAgain).
		used := int64(m.DiskSpaceUsage() - m.WAL.ObsoletePhysicalSize)
		if r.memory {
			used += int64(m.MemTable.Size)
		}
		left = r.maxBytes - used
	}
	if !r.memory {
		if u, err := r.fsys.GetDiskUsage(r.dir); err == nil {
			left = min(left, int64(min(u.AvailBytes, math.MaxInt64))-r.reserve)
		}
	}
	r.left, r.measured = left, time.Now()
}

// reclaimer gives the space of deleted mail back while the store runs. It
// flushes the memtable once deletes have freed space, so that their
// tombstones reach the store's files, where Pebble's compactions drop them
// with what they delete. A large store's compactions come by themselves,
// driven by the size its deletes free (DeleteSized); a store whose levels
// are far below their targets would keep its peak size, so once the deletes
// since the last compaction add up to a tenth of the store, the reclaimer
// compacts the span of keys they fall in (retention deletes the oldest
// mail: a narrow span). Deletes short of that tenth are compacted once they
// stop (a tick finds none since the last), or at once when a create finds
// the store full: their bodies' blob files stay as long as a table refers
// to them, deleted or not.
type reclaimer struct {
	db     *pebble.DB
	log    *slog.Logger
	kick   chan struct{}
	full   chan struct{}
	every  time.Duration
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	freed   int64  // bytes deleted since the last flush
	pending int64  // bytes deleted since the last compaction
	lo, hi  []byte // the span of the keys deleted since then
}

const (
	// reclaimEvery is how often the deletes of a quiet store are flushed.
	reclaimEvery = 10 * time.Second
	// reclaimNow is how many bytes deleted flush at once.
	reclaimNow = 4 << 20
)

func startReclaimer(db *pebble.DB, log *slog.Logger, every time.Duration) *reclaimer {
	ctx, cancel := context.WithCancel(context.Background())
	r := &reclaimer{db: db, log: log.With("component", "pebble"), kick: make(chan struct{}, 1), full: make(chan struct{}, 1),
		every: every, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go r.run()
	return r
}

// deleted counts n bytes deleted under key.
func (r *reclaimer) deleted(key []byte, n int64) {
	r.mu.Lock()
	r.freed += n
	r.pending += n
	if r.lo == nil || bytes.Compare(key, r.lo) < 0 {
		r.lo = bytes.Clone(key)
	}
	if bytes.Compare(key, r.hi) > 0 {
		r.hi = bytes.Clone(key)
	}
	now := r.freed >= reclaimNow
	r.mu.Unlock()
	if now {
		poke(r.kick)
	}
}

// urge asks for the deletes not yet compacted to be compacted now: a create
// found the store full.
func (r *reclaimer) urge() { poke(r.full) }

// poke wakes the reclaimer through c, unless a wake-up is already waiting.
func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (r *reclaimer) run() {
	defer close(r.done)
	tick := time.NewTicker(r.every)
	defer tick.Stop()
	for {
		full := false
		select {
		case <-r.ctx.Done():
			return
		case <-tick.C:
		case <-r.kick:
		case <-r.full:
			full = true
		}
		r.mu.Lock()
		freed, pending := r.freed, r.pending
		r.freed = 0
		r.mu.Unlock()
		if pending == 0 {
			continue
		}
		if freed > 0 {
			if err := r.db.Flush(); err != nil {
				r.log.Warn("flushing deletes to give their space back", "err", err)
				continue
			}
		}
		// freed == 0: no delete since the last wake-up, they have stopped.
		all := full || freed == 0
		r.mu.Lock()
		var lo, hi []byte
		if all || r.pending*10 >= int64(r.db.Metrics().DiskSpaceUsage()) {
			lo, hi = r.lo, r.hi
			r.pending, r.lo, r.hi = 0, nil, nil
		}
		r.mu.Unlock()
		if lo == nil {
			continue
		}
		if err := r.db.Compact(r.ctx, lo, append(hi, 0), false); err != nil && r.ctx.Err() == nil {
			r.log.Warn("compacting deleted mail to give its space back", "err", err)
		}
	}
}

// close stops the reclaimer and waits for it.
func (r *reclaimer) close() {
	r.cancel()
	<-r.done
}
