package pebblestore

import (
	"errors"
	"math"
	"sync"
	"time"

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
		used := int64(m.DiskSpaceUsage())
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
