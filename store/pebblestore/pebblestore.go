// Package pebblestore keeps mailsink's emails in a Pebble database
// (github.com/cockroachdb/pebble): every email, its indexes and its body, in
// a directory or, with OpenInMemory, in memory (MAILSINK_DATA_DIR=:memory:).
// It is mailsink's embedded store.
//
// A write is a Pebble batch. Changes that read before they write (a create
// checks that its ids are new, a delete reads the email it removes, the
// account's totals are read and written back) apply their batches one at a
// time, under one lock, and wait for the sync outside it: Pebble's commit
// pipeline then syncs the batches of concurrent writers with one fsync, so
// an SMTP burst is not serialised on the disk. A write returns once its
// batch is synced. keys.go holds the layout; space.go keeps creates within
// the room the store may use and gives the space of deleted mail back.
package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/mailsink/mailsink/internal/eventhub"
	"github.com/mailsink/mailsink/internal/rawzip"
	"github.com/mailsink/mailsink/store"
)

// schemaVersion is written to a new store and checked on open: a store of
// a newer version is refused. A version that adds keys or record formats
// an older build would misread, or writes that it would leave stale,
// raises it.
//
// Version 2: index entries hold a copy of their email's record (keys.go).
// A build of version 1 would update a record and leave its copies as they
// were, so it must not open such a store, and refuses it. A store of version
// 1 is opened and raised to 2: its index entries are empty, and a list
// looks those emails up, as version 1 did.
const schemaVersion = "2"

// upgradable is the schema version this build opens and raises to
// schemaVersion, with no other change.
const upgradable = "1"

// Store is a store.Store kept in Pebble. It is safe for concurrent use.
type Store struct {
	db     *pebble.DB
	memory bool
	log    *slog.Logger
	// events fans out this process's changes: the directory is locked by
	// one process, so every subscriber is here.
	events *eventhub.Hub
	// zip compresses the raw sources of creates.
	zip rawzip.Compressor
	// faults caches the fault rules (faults.go).
	faults faultCache
	// room keeps writes within the disk or memory the store may use.
	room *room
	// reclaim flushes deletes so that compactions give their space back.
	reclaim *reclaimer

	// mu serialises the changes that read before they write (change).
	mu sync.Mutex
	// seq is the number of the last event given, under mu.
	seq uint64

	// life guards db against use after Close: every call holds it for
	// reading, Close for writing.
	life   sync.RWMutex
	closed bool
}

var _ store.Store = (*Store)(nil)

// Option changes how a store is opened.
type Option func(*options)

type options struct {
	log         *slog.Logger
	lockTimeout time.Duration
	// maxBytes, when not 0, bounds what the store's files (and, in
	// memory, its memtables) hold: past it, creates answer Full.
	maxBytes int64
	// reserve is the free disk space creates leave for Pebble's flushes
	// and compactions.
	reserve int64
	// rewriteAge is the age past which a blob file with garbage is
	// rewritten (valueSeparation).
	rewriteAge time.Duration
	// reclaimEvery is how often the reclaimer looks at a quiet store's
	// deletes.
	reclaimEvery time.Duration
}

// WithLogger sends Pebble's own log lines to log, at debug level for its
// routine news and at warn or error for what an operator should see. The
// default discards them.
func WithLogger(log *slog.Logger) Option {
	return func(o *options) { o.log = log }
}

// WithLockTimeout sets how long Open waits for the lock that another
// process may hold on the directory before it fails. The default is one
// second.
func WithLockTimeout(d time.Duration) Option {
	return func(o *options) { o.lockTimeout = d }
}

// WithMaxBytes bounds the bytes the store holds (its files, and in memory
// its memtables too): past it, creates fail with code Full, as on a full
// disk. 0, the default on disk, leaves only the disk's own bound. On disk,
// the spent log files Pebble keeps for reuse are not counted: up to
// queuedWrites/memTableSize+1 (nine), each the size of a memtable (4 MiB)
// or more after a large message.
func WithMaxBytes(n int64) Option {
	return func(o *options) { o.maxBytes = n }
}

// DefaultReserve is the free disk space creates leave for Pebble: past it
// they fail with code Full, while deletes go on and compactions give the
// space of deleted mail back. A flush or compaction that found the disk full
// would stop the process.
const DefaultReserve = 128 << 20

// memTableSize is the size of Pebble's memtables, on disk and in memory
// (where they count against the store's bound). Pebble holds at least two,
// the one being written and a spent one it keeps to reuse, and charges
// each to the block cache's budget (Options.CacheSize), whose rest holds
// blocks: after make bench's ingest rows they were most of Pebble's part of
// the heap, and with 8 MiB ones RSS was 105.8 MiB in its run of 2026-11-28
// 20:56 UTC, 98.5 MiB with 4 MiB (docs/benchmarks.md). A batch of more
// than half of it (a message over about 2 MiB) is written to the log and
// queued for its flush as it is, with no copy in a memtable.
const memTableSize = 4 << 20

// l0Compaction sets when Pebble compacts level 0 into the next level: once
// about l0Compaction/2 sublevels (each a flushed memtable) wait, as Pebble
// counts their depth twice. Writes stall at l0StopWrites sublevels.
// (Pebble's defaults are 4 and 12.) Each such compaction rewrites most of
// the next level, since the index entries of new mail spread over the
// account's recipients and senders, so the bytes compacted grow with the
// number of compactions: one waits for about l0Compaction/2 memtables,
// 32 MiB of flushes, as many bytes as with larger memtables and a lower
// threshold (BenchmarkIngestCompactions measures the bytes compacted,
// docs/benchmarks.md). Lists merge the sublevels that wait.
const (
	l0Compaction = 16
	l0StopWrites = 3 * l0Compaction
)

// queuedWrites bounds the bytes of the memtables and large batches queued,
// the memtable being written included (Options.MemTableStopWritesThreshold
// counts it in memtables): once they reach it, a write that needs a new
// memtable stalls until flushes make room. So a 25 MB message queued beside
// a full memtable holds the next one back until their flush; 100 of them
// at once took no more time or CPU than with twice the bound
// (docs/benchmarks.md).
const queuedWrites = 32 << 20

// blockCache is the block cache Pebble keeps beyond its memtables and
// large batches (as many as queuedWrites holds), whose memory it counts
// against the same budget (Options.CacheSize): without room left beside
// them, no block stays cached and every lookup of a new id reads filter
// blocks from the files.
const blockCache = 32 << 20

// valueSeparation has Pebble keep values of separateValues bytes or more
// (message bodies) in blob files, which compactions rewrite only when a
// table would refer to more than MaxBlobReferenceDepth overlapping ones
// (BenchmarkIngestCompactions reports the bytes): they carry the keys and
// a reference, where they rewrote every body each time its table moved
// down a level (most of the CPU of storing 25 MB messages, and copies of
// them in memory, docs/benchmarks.md). Records and index entries stay in
// the tables, next to their keys, for lists. A blob file is dropped once
// none of its values is referenced, and rewritten without the deleted ones
// once garbageRatio of it is garbage and it is older than rewriteAge: the
// space of deleted mail comes back about rewriteAge after the deletes, but
// for less than garbageRatio of each blob file.
func valueSeparation(rewriteAge time.Duration) pebble.ValueSeparationPolicy {
	return pebble.ValueSeparationPolicy{
		Enabled:               true,
		MinimumSize:           separateValues,
		MaxBlobReferenceDepth: 10,
		RewriteMinimumAge:     rewriteAge,
		TargetGarbageRatio:    garbageRatio,
	}
}

const (
	// separateValues is the least value kept in a blob file: a body of a
	// few lines is; an email's record is not unless long notes make it
	// that long, nor are its index entries' copies of it (maxCovered is
	// less), which a list reads in place.
	separateValues = 1 << 10
	rewriteAge     = time.Minute
	garbageRatio   = 0.2
)

// Open opens the store in the directory dir, creating it (and dir) when it
// does not exist. When another process holds the directory, Open fails
// after the lock timeout with an error with code Unavailable. Its errors are
// for the operator, not a client: they name the directory.
func Open(dir string, opts ...Option) (*Store, error) {
	o := options{lockTimeout: time.Second, reserve: DefaultReserve, rewriteAge: rewriteAge,
		reclaimEvery: reclaimEvery}
	for _, opt := range opts {
		opt(&o)
	}
	return open(vfs.Default, dir, false, o)
}

// OpenInMemory opens an empty store that lives in this process's memory
// and holds at most maxBytes (see WithMaxBytes; 0 bounds it only by the
// memory there is). Nothing of it survives Close.
func OpenInMemory(maxBytes int64, opts ...Option) (*Store, error) {
	o := options{rewriteAge: rewriteAge, reclaimEvery: reclaimEvery}
	for _, opt := range opts {
		opt(&o)
	}
	o.maxBytes = maxBytes
	return open(vfs.NewMem(), "store", true, o)
}

func open(fsys vfs.FS, dir string, memory bool, o options) (*Store, error) {
	log := o.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	popts := &pebble.Options{
		FS:                          fsys,
		FormatMajorVersion:          pebble.FormatNewest,
		MemTableSize:                memTableSize,
		L0CompactionThreshold:       l0Compaction,
		L0StopWritesThreshold:       l0StopWrites,
		MemTableStopWritesThreshold: queuedWrites / memTableSize,
		Logger:                      pebbleLogger{log},
		EventListener:               eventListener(log),
		// In memory there is nothing to recover after a crash: no log.
		DisableWAL: memory,
	}
	popts.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy { return valueSeparation(o.rewriteAge) }
	for i := range popts.Levels {
		// Creates look up ids that are new: a filter answers without
		// reading a block.
		popts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	popts.CacheSize = queuedWrites + blockCache
	if memory {
		// The files are in memory already.
		popts.CacheSize = queuedWrites + 4<<20
	}
	if !memory {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, store.Wrap(codeOf(err), err, "open "+dir)
		}
	}
	var db *pebble.DB
	var err error
	deadline := time.Now().Add(o.lockTimeout)
	for {
		db, err = pebble.Open(dir, popts)
		if err == nil || !isLocked(err) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		if isLocked(err) {
			return nil, store.Wrap(store.Unavailable, err,
				fmt.Sprintf("open %s: the store is locked by another process (waited %s)", dir, o.lockTimeout))
		}
		return nil, store.Wrap(codeOf(err), err, "open "+dir)
	}
	sync := pebble.Sync
	if memory {
		sync = pebble.NoSync
	}
	if err := checkVersion(db, dir, sync); err != nil {
		_ = db.Close()
		return nil, err
	}
	s := &Store{db: db, memory: memory, log: log, events: eventhub.New(0)}
	s.room = newRoom(s, fsys, dir, memory, o)
	s.reclaim = startReclaimer(db, log, o.reclaimEvery)
	s.events.StartSequence(1)
	return s, nil
}

// isLocked reports whether err is Pebble's failure to lock a directory
// that another process (or this one) holds.
func isLocked(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) ||
		strings.Contains(err.Error(), "lock held by current process")
}

// checkVersion writes the schema version to a new store, raises that of a
// store of version upgradable, and refuses one written by a newer mailsink.
func checkVersion(db *pebble.DB, dir string, sync *pebble.WriteOptions) error {
	v, closer, err := db.Get([]byte{tagVersion})
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return wrap(db.Set([]byte{tagVersion}, []byte(schemaVersion), sync), "open "+dir)
	case err != nil:
		return wrap(err, "open "+dir)
	}
	version := string(v)
	closer.Close()
	switch version {
	case schemaVersion:
		return nil
	case upgradable:
		return wrap(db.Set([]byte{tagVersion}, []byte(schemaVersion), sync), "open "+dir)
	}
	return internalf("open %s: the store has schema version %q and this build reads versions %s and %s: "+
		"it was written by a newer mailsink", dir, version, upgradable, schemaVersion)
}

// Info implements store.Store.
func (s *Store) Info() store.Info {
	if s.memory {
		return store.Info{Name: "embedded", Local: true,
			Guarantee: "250 once it is in memory: nothing survives a restart (MAILSINK_DATA_DIR=:memory:)"}
	}
	return store.Info{Name: "embedded", Local: true,
		Guarantee: "250 once its commit is synced to disk: a crash of mailsink or of the machine keeps it"}
}

// enter makes a call of the store's: it returns Unavailable once the store
// is closed, and otherwise holds it open until leave.
func (s *Store) enter(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return wrap(err, op)
	}
	s.life.RLock()
	if s.closed {
		s.life.RUnlock()
		return store.Wrap(store.Unavailable, errors.New("pebblestore: closed"), "store unavailable")
	}
	return nil
}

func (s *Store) leave() { s.life.RUnlock() }

// Ping implements store.Store: it returns Unavailable once the store is
// closed.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.enter(ctx, "ping"); err != nil {
		return err
	}
	s.leave()
	return nil
}

// Close implements store.Store. It waits for the calls in progress and, on
// disk, flushes the memtables, so that the next Open has no log to replay
// and the store's files hold all of it.
func (s *Store) Close() error {
	s.faults.close()
	s.life.Lock()
	defer s.life.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.reclaim.close()
	s.events.Close()
	var err error
	if !s.memory {
		err = s.db.Flush()
	}
	return wrap(errors.Join(err, s.db.Close()), "close")
}

// change applies the batch that fill makes, holding s.mu from before fill
// runs until the batch is in Pebble's memtable, so that what fill reads
// (with s.db.Get or an iterator) holds every earlier change and none can
// come between. fill returns how many events its change publishes; change
// numbers them and returns the first number. On disk the batch is synced
// before change returns, after s.mu is let go, so that concurrent changes
// share a sync. fill's errors are returned as they are, and nothing is
// written then.
func (s *Store) change(fill func(b *pebble.Batch) (events int, err error)) (first uint64, err error) {
	return s.changeBatch(s.db.NewBatch(), fill)
}

// changeBatch is change with a batch that may hold writes already, made
// before s.mu is taken; it closes b.
func (s *Store) changeBatch(b *pebble.Batch, fill func(b *pebble.Batch) (events int, err error)) (first uint64, err error) {
	return s.apply(b, !s.memory, fill)
}

// changeDerived is change for what can be made again from the store's
// other data (check results): it does not wait for the disk, so a crash
// may lose it, and it publishes no event. The next synced change (any
// create or delete) takes it to the disk with its own.
func (s *Store) changeDerived(fill func(b *pebble.Batch) error) error {
	_, err := s.apply(s.db.NewBatch(), false, func(b *pebble.Batch) (int, error) { return 0, fill(b) })
	return err
}

// apply fills b under s.mu and applies it, waiting for the disk when sync
// is set; it closes b.
func (s *Store) apply(b *pebble.Batch, sync bool, fill func(b *pebble.Batch) (events int, err error)) (first uint64, err error) {
	defer b.Close()
	s.mu.Lock()
	n, err := fill(b)
	if err != nil || b.Empty() {
		s.mu.Unlock()
		return 0, err
	}
	first = s.seq + 1
	if sync {
		err = s.db.ApplyNoSyncWait(b, pebble.Sync)
	} else {
		err = s.db.Apply(b, pebble.NoSync)
	}
	if err != nil {
		s.mu.Unlock()
		return 0, err
	}
	s.seq += uint64(n)
	s.mu.Unlock()
	if sync {
		if err := b.SyncWait(); err != nil {
			// The change is in the memtable but not on disk: it is
			// answered as failed and its events are not published.
			for i := range n {
				s.events.SkipInOrder(first + uint64(i))
			}
			return 0, err
		}
	}
	return first, nil
}

// get returns a copy of the value under key, or nil when there is none.
func (s *Store) get(key []byte) ([]byte, error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return append(make([]byte, 0, len(v)), v...), nil
}

// has reports whether key holds a value.
func (s *Store) has(key []byte) (bool, error) {
	_, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	closer.Close()
	return true, nil
}

// wrap gives err a store code unless it has one, and nil for nil. The
// client-safe message names only the kind of failure; op and the cause go to
// the log.
func wrap(err error, op string) error {
	if err == nil {
		return nil
	}
	var se *store.Error
	if errors.As(err, &se) {
		return err
	}
	cause := fmt.Errorf("pebblestore: %s: %w", op, err)
	if errors.Is(err, errCorrupt) {
		return store.Wrap(store.Internal, cause, "store error")
	}
	switch code := codeOf(err); code {
	case store.Unavailable:
		return store.Wrap(code, cause, "store unavailable")
	case store.Full:
		return store.Wrap(code, cause, "store full")
	default:
		return store.Wrap(code, cause, "store error")
	}
}

// internalf returns an Internal error: the store holds something it did not
// expect, and only the log should say what.
func internalf(format string, args ...any) error {
	return store.Wrap(store.Internal, fmt.Errorf("pebblestore: "+format, args...), "store error")
}

func codeOf(err error) store.Code {
	var errno syscall.Errno
	var pathErr *fs.PathError
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return store.Full
	case errors.Is(err, pebble.ErrClosed),
		errors.Is(err, context.Canceled),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, os.ErrPermission),
		errors.As(err, &pathErr),
		errors.As(err, &errno):
		return store.Unavailable
	}
	return store.Internal
}
