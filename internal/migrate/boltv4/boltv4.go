// Package boltv4 reads the embedded store of mailsink releases before the
// store moved to Pebble: one bbolt file (mailsink.db) and its write-ahead
// log (mailsink.db.wal.*), schema versions 1 to 4. It lives on only so that
// package migrate can move such a data directory to store/pebblestore, and
// is to be deleted, with bbolt, in a later release: nothing else may
// import it.
//
// Open upgrades a file of an older schema version and replays the log, as
// the release that wrote it did, so the directory stays usable by that
// release. Export then hands every record to the new store. The write
// paths remain because the tests make old directories with them.
//
// Writes are durable when they return: creates are in the write-ahead log
// (wal.go), synced, and applied to bbolt in the background; other writes are
// bbolt commits with fsync, shared by concurrent writers (commit.go). See
// keys.go for the layout.
package boltv4

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/mailsink/mailsink/internal/eventhub"
	"github.com/mailsink/mailsink/internal/rawzip"
	"github.com/mailsink/mailsink/store"
)

// schemaVersion is written to a new file and checked on open; a file of
// an older version is upgraded (see keys.go), one of a newer version is
// refused.
const schemaVersion = "4"

// Store is a store.Store kept in one bbolt file. It is safe for concurrent
// use.
type Store struct {
	db *bolt.DB
	// commits runs the read-write transactions, in group commits.
	commits *committer
	// events fans out this process's changes: the file is locked by one
	// process, so every subscriber is here.
	events *eventhub.Hub
	// wal logs creates before bbolt has them (wal.go).
	wal *walLog
	// faults caches the fault rules (faults.go).
	faults faultCache
	// zip compresses the raw sources of creates.
	zip rawzip.Compressor
	// sessions keeps dashboard sessions (sessions.go).
	sessions *sessions
}

var _ store.Store = (*Store)(nil)

// Option changes how Open opens the file.
type Option func(*options)

type options struct {
	lockTimeout  time.Duration
	maxBatchSize int
	// maxSize, when not 0, is the most the file may grow to: the tests'
	// full disk.
	maxSize int
	// applyEvery and applySoon are the applier's gathering times
	// (walLog.gather): walApplyEvery and walApplySoon but in tests.
	applyEvery, applySoon time.Duration
	// maxPending bounds the emails logged but not applied: walMaxPending
	// but in tests.
	maxPending int
}

// WithLockTimeout sets how long Open waits for the file lock that another
// process may hold before it fails. The default is one second.
func WithLockTimeout(d time.Duration) Option {
	return func(o *options) { o.lockTimeout = d }
}

// WithMaxBatchSize sets how many writes at most share one commit (commit.go).
// The default is 1000.
func WithMaxBatchSize(n int) Option {
	return func(o *options) { o.maxBatchSize = n }
}

// Open opens the store file at path, creating it if it does not exist. The
// directory must exist. When another process holds the file, Open fails after
// the lock timeout with an error with code Unavailable. Its errors are for
// the operator, not a client: they name the file.
func Open(path string, opts ...Option) (*Store, error) {
	o := options{lockTimeout: time.Second, maxBatchSize: 1000, applyEvery: walApplyEvery, applySoon: walApplySoon,
		maxPending: walMaxPending}
	for _, opt := range opts {
		opt(&o)
	}
	db, err := openCurrent(path, o)
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, store.Wrap(store.Unavailable, err,
			fmt.Sprintf("open %s: the file is locked by another process (waited %s)", path, o.lockTimeout))
	}
	if err != nil {
		return nil, store.Wrap(codeOfDBError(err), err, "open "+path)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		switch v := meta.Get([]byte("version")); {
		case v == nil:
			return meta.Put([]byte("version"), []byte(schemaVersion))
		case string(v) == "1":
			if err := rebuildStats(tx); err != nil {
				return err
			}
			return meta.Put([]byte("version"), []byte(schemaVersion))
		case string(v) == "2" || string(v) == "3":
			// Version 4 reads every record of versions 2 and 3 as they
			// are; it adds the write-ahead log (wal.go), which a build
			// that reads version 3 would ignore.
			return meta.Put([]byte("version"), []byte(schemaVersion))
		case string(v) != schemaVersion:
			return internalf("open %s: the file has schema version %q and this build reads versions 1 to %s: "+
				"it was written by a newer mailsink", path, v, schemaVersion)
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, wrap(err, "open "+path)
	}
	logged, err := loadWAL(db, path)
	if err != nil {
		_ = db.Close()
		return nil, wrap(err, "open "+path+": read the write-ahead log")
	}
	s := &Store{db: db, events: eventhub.New(0), commits: newCommitter(db, max(o.maxBatchSize, 1)), wal: newWALLog(db, path, logged),
		sessions: newSessions(time.Now)}
	s.wal.every, s.wal.soonEvery, s.wal.maxPending = o.applyEvery, o.applySoon, o.maxPending
	var seq uint64
	if err := db.View(func(tx *bolt.Tx) error { seq = tx.Bucket(bucketEvents).Sequence(); return nil }); err != nil {
		_ = db.Close()
		return nil, wrap(err, "open "+path)
	}
	s.events.StartSequence(seq + 1)
	go s.applyLoop()
	return s, nil
}

// Info implements store.Store.
func (s *Store) Info() store.Info {
	return store.Info{Name: "embedded", Local: true,
		Guarantee: "250 once its write-ahead log entry is synced to disk: a crash of mailsink or of the machine keeps it"}
}

// openCurrent opens the bbolt file at path and locks it, waiting at most
// lockTimeout for the lock. Compact renames its copy over path while the
// old file is locked: a process that opened the old file meanwhile gets its
// lock once Compact lets go, on a file no longer at path, and everything it
// wrote would be lost. So the file locked must still be the one at path;
// when it is not, openCurrent opens path again.
func openCurrent(path string, o options) (*bolt.DB, error) {
	for {
		before, statErr := os.Stat(path)
		db, err := bolt.Open(path, 0o600, &bolt.Options{
			Timeout:      o.lockTimeout,
			FreelistType: bolt.FreelistMapType,
			MaxSize:      o.maxSize,
		})
		if err != nil {
			return nil, err
		}
		after, err := os.Stat(path)
		if statErr != nil || err != nil || os.SameFile(before, after) {
			return db, nil
		}
		_ = db.Close()
	}
}

// CreateEmails implements store.Store. It returns Invalid for an empty slice,
// a nil body or email, an email without id, account or valid status, emails
// of different accounts or a repeated id, and Conflict when an id already
// exists in the account.
func (s *Store) CreateEmails(ctx context.Context, body *store.Body, emails []*store.Email) error {
	if err := ctx.Err(); err != nil {
		return wrap(err, "create emails")
	}
	if err := validateCreate(body, emails); err != nil {
		return err
	}
	op := newCreateOp(&s.zip, body, emails)
	if err := op.fits(); err != nil {
		return wrap(err, "create emails")
	}
	if len(op.body) <= walMaxBody {
		// The applier publishes the events, later: it keeps copies.
		logged := *op
		logged.emails = cloneEmails(emails)
		err := wrap(s.logCreate(ctx, &logged), "create emails")
		if !store.IsCode(err, store.Full) || s.wal.owesCancel() {
			return err
		}
		// The log could not grow (nothing of it is stored): bbolt may
		// still have free pages, as it does once mail is deleted from a
		// full disk.
	}
	if err := s.wal.beginDirect(op); err != nil {
		return err
	}
	err := s.write(op.apply)
	s.wal.endDirect(op)
	if err != nil {
		return wrap(err, "create emails")
	}
	for i, e := range emails {
		s.publish(op.firstEvent+uint64(i), store.EmailCreated, e.AccountID, e.ID, e)
	}
	return nil
}

// cloneEmails copies emails deeply, with Labels never nil, as a stored
// email's are.
func cloneEmails(emails []*store.Email) []*store.Email {
	out := make([]*store.Email, len(emails))
	for i, e := range emails {
		c := *e
		c.Labels = append(make([]string, 0, len(e.Labels)), e.Labels...)
		c.MessageID, c.Subject, c.Notes = cloneString(e.MessageID), cloneString(e.Subject), cloneString(e.Notes)
		out[i] = &c
	}
	return out
}

// nextEvents numbers n events inside tx, so that the numbers follow commit
// order; it returns the first. The numbers of a transaction that rolls back
// are given again, so those of committed ones have no gaps.
func nextEvents(tx *bolt.Tx, n int) (uint64, error) {
	b := tx.Bucket(bucketEvents)
	first := b.Sequence() + 1
	if err := b.SetSequence(first + uint64(n) - 1); err != nil {
		return 0, err
	}
	return first, nil
}

// publish announces a committed change numbered seq by nextEvents. Writers
// finish in any order; the hub delivers by number, so in commit order.
func (s *Store) publish(seq uint64, typ store.EventType, accountID, id string, e *store.Email) {
	if e != nil {
		c := *e
		c.Labels = append([]string(nil), e.Labels...)
		e = &c
	}
	s.events.PublishInOrder(seq, store.Event{Type: typ, AccountID: accountID, EmailID: id, Email: e})
}

// Subscribe implements store.Events.
func (s *Store) Subscribe(accountID string) store.Subscription { return s.events.Subscribe(accountID) }

// eventWait bounds how long EventsAfter waits for events numbered before
// the last commit to be published.
const eventWait = time.Second

// EventsAfter implements store.Events from this process's history, which
// starts empty when the store is opened, after the account's logged creates
// are applied.
func (s *Store) EventsAfter(ctx context.Context, accountID, afterID string) ([]store.Event, bool, error) {
	// The events of logged creates are numbered when they are applied: an
	// answered create is in the history once it is, and once the events
	// numbered before it, which writers sharing its commit publish on their
	// own, are out too.
	if err := s.wal.settleAccount(ctx, accountID); err != nil {
		return nil, false, wrap(err, "events after")
	}
	var seq uint64
	if err := s.db.View(func(tx *bolt.Tx) error { seq = tx.Bucket(bucketEvents).Sequence(); return nil }); err != nil {
		return nil, false, wrap(err, "events after")
	}
	// A number committed but never published (a commit reported failed
	// after it reached the disk) must not hold the reader for long.
	wait, cancel := context.WithTimeout(ctx, eventWait)
	defer cancel()
	if err := s.events.WaitSequence(wait, seq); err != nil && ctx.Err() != nil {
		return nil, false, wrap(ctx.Err(), "events after")
	}
	return s.events.After(accountID, afterID)
}

// createOp is one validated CreateEmails call. Everything that does not
// depend on the transaction is computed once, in newCreateOp: a group commit
// may call apply more than once.
type createOp struct {
	emails   []*store.Email
	body     []byte
	keys     [][]byte
	indexes  [][4][]byte
	rawBytes int64 // sum of the emails' RawSize
	// firstEvent is the number of the first email's event, set by the run
	// of apply that committed.
	firstEvent uint64
	// skipped is set by the run of applyOps that committed when it found
	// the op applied already (wal.go).
	skipped bool
}

func newCreateOp(z *rawzip.Compressor, body *store.Body, emails []*store.Email) *createOp {
	op := &createOp{emails: emails, body: encodeBody(z, body)}
	op.prepare()
	return op
}

// fits returns bbolt's error for a key or value it would refuse, so that a
// create the log answers can always be applied.
func (op *createOp) fits() error {
	if len(op.body) > bolt.MaxValueSize {
		return berrors.ErrValueTooLarge
	}
	for i := range op.keys {
		if len(op.keys[i]) > bolt.MaxKeySize {
			return berrors.ErrKeyTooLarge
		}
		for _, k := range op.indexes[i] {
			if len(k) > bolt.MaxKeySize {
				return berrors.ErrKeyTooLarge
			}
		}
	}
	return nil
}

// prepare computes the keys of op's emails.
func (op *createOp) prepare() {
	op.keys = make([][]byte, len(op.emails))
	op.indexes = make([][4][]byte, len(op.emails))
	op.rawBytes = 0
	for i, e := range op.emails {
		op.keys[i] = emailKey(e.AccountID, e.ID)
		op.indexes[i] = indexKeys(e)
		op.rawBytes += e.RawSize
	}
}

// apply writes the body, the emails, their indexes and the account's
// totals in tx.
func (op *createOp) apply(tx *bolt.Tx) error {
	if err := op.write(tx, 0); err != nil {
		return err
	}
	// The totals are read from tx and written back, so a run that a group
	// commit repeats after a rollback adds them once.
	return addStats(tx, op.emails[0].AccountID, int64(len(op.emails)), op.rawBytes)
}

// write writes the body, the emails and their indexes in tx, not the
// account's totals. Its first absent emails are known not to be in tx.
func (op *createOp) write(tx *bolt.Tx, absent int) error {
	eb, ib := writeBucket(tx, bucketEmails), writeBucket(tx, bucketIndex)
	bodies := writeBucket(tx, bucketBodies)
	for i, e := range op.emails[absent:] {
		if eb.Get(op.keys[absent+i]) != nil {
			return store.Errorf(store.Conflict, "email %s already exists", e.ID)
		}
	}
	seq, err := bodies.NextSequence()
	if err != nil {
		return err
	}
	bk := bodyKey(seq)
	if err := bodies.Put(bk, op.body); err != nil {
		return err
	}
	if len(op.emails) > 1 {
		refs := writeBucket(tx, bucketRefs)
		if err := refs.Put(bk, binary.AppendUvarint(nil, uint64(len(op.emails)))); err != nil {
			return err
		}
	}
	for i, e := range op.emails {
		r := emailRecord{Email: *e, BodyID: seq}
		if r.Labels == nil {
			r.Labels = []string{}
		}
		if err := eb.Put(op.keys[i], encodeEmail(&r)); err != nil {
			return err
		}
		for _, k := range op.indexes[i] {
			if err := ib.Put(k, []byte{}); err != nil {
				return err
			}
		}
	}
	first, err := nextEvents(tx, len(op.emails))
	op.firstEvent = first
	return err
}

func validateCreate(body *store.Body, emails []*store.Email) error {
	if len(emails) == 0 {
		return store.Errorf(store.Invalid, "no emails to create")
	}
	if body == nil {
		return store.Errorf(store.Invalid, "no body")
	}
	seen := make(map[string]bool, len(emails))
	for _, e := range emails {
		switch {
		case e == nil:
			return store.Errorf(store.Invalid, "nil email")
		case e.ID == "":
			return store.Errorf(store.Invalid, "email without id")
		case e.AccountID == "":
			return store.Errorf(store.Invalid, "email %s without account", e.ID)
		case e.AccountID != emails[0].AccountID:
			return store.Errorf(store.Invalid, "emails of more than one account")
		case !e.Status.Valid():
			return store.Errorf(store.Invalid, "email %s has status %q", e.ID, e.Status)
		case seen[e.ID]:
			return store.Errorf(store.Invalid, "email %s given twice", e.ID)
		}
		seen[e.ID] = true
	}
	return nil
}

// GetEmail implements store.Store.
func (s *Store) GetEmail(ctx context.Context, accountID, id string) (*store.Email, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrap(err, "get email")
	}
	pending := s.wal.pendingOf(accountID)
	var e *store.Email
	err := s.db.View(func(tx *bolt.Tx) error {
		if op, i := findUnapplied(tx, pending, accountID, id); op != nil {
			e = cloneEmails(op.emails[i : i+1])[0]
			return nil
		}
		r, err := getRecord(tx, accountID, id)
		if err == nil {
			e = &r.Email
		}
		return err
	})
	if err != nil {
		return nil, wrap(err, "get email")
	}
	return e, nil
}

// findUnapplied returns the create among pending (from walLog.pendingOf,
// taken before tx began) that holds the email and that tx does not, and the
// email's place in it.
func findUnapplied(tx *bolt.Tx, pending []walOp, accountID, id string) (*createOp, int) {
	if len(pending) == 0 {
		return nil, 0
	}
	key := emailKey(accountID, id)
	for _, o := range unapplied(pending, readApplied(tx)) {
		for i, k := range o.op.keys {
			if bytes.Equal(k, key) {
				return o.op, i
			}
		}
	}
	return nil, 0
}

// GetBody implements store.Store.
func (s *Store) GetBody(ctx context.Context, accountID, id string) (*store.Body, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrap(err, "get body")
	}
	pending := s.wal.pendingOf(accountID)
	var body *store.Body
	err := s.db.View(func(tx *bolt.Tx) error {
		if op, _ := findUnapplied(tx, pending, accountID, id); op != nil {
			var err error
			body, err = decodeBody(op.body)
			return err
		}
		r, err := getRecord(tx, accountID, id)
		if err != nil {
			return err
		}
		v := tx.Bucket(bucketBodies).Get(bodyKey(r.BodyID))
		if v == nil {
			return internalf("email %s: body %d is missing", id, r.BodyID)
		}
		body, err = decodeBody(v)
		return err
	})
	if err != nil {
		return nil, wrap(err, "get body")
	}
	return body, nil
}

func getRecord(tx *bolt.Tx, accountID, id string) (*emailRecord, error) {
	k := emailKey(accountID, id)
	v := tx.Bucket(bucketEmails).Get(k)
	if v == nil {
		return nil, store.ErrNotFound
	}
	return decodeEmail(k, v)
}

// ListEmails implements store.Store. It returns Invalid when the query has no
// account, a Limit below 1 or a negative Offset, and NotFound when q.Before
// names no email of the account.
//
// It walks one index (recipient, then sender, then status, then all of the
// account's emails, whichever the query has first) from newest to oldest, or
// from just after q.Before, looks each entry up in the indexes of the other
// address and status filters, and checks the subject and label filters on
// each remaining email's metadata. Since ends the walk at the first email not
// after it. Bodies are never read.
func (s *Store) ListEmails(ctx context.Context, q store.ListQuery) ([]*store.Email, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrap(err, "list emails")
	}
	switch {
	case q.AccountID == "":
		return nil, store.Errorf(store.Invalid, "list: no account")
	case q.Limit < 1:
		return nil, store.Errorf(store.Invalid, "list: limit %d is below 1", q.Limit)
	case q.Offset < 0:
		return nil, store.Errorf(store.Invalid, "list: negative offset %d", q.Offset)
	}
	// Logged emails not in bbolt yet that the page would hold are merged
	// into a first page; a later page, or one after a logged email, waits
	// for the applier (wal.go).
	matches, cursor := queryPending(s.wal.pendingOf(q.AccountID), q)
	if cursor > 0 || len(matches) > 0 && (q.Offset > 0 || q.Before != "") {
		if err := s.wal.waitApplied(ctx, max(cursor, lastLSN(matches)), true); err != nil {
			return nil, wrap(err, "list emails")
		}
		matches = nil
	}
	out := make([]*store.Email, 0, min(q.Limit, 100))
	err := s.db.View(func(tx *bolt.Tx) error {
		matches = unappliedMatches(matches, readApplied(tx))
		return walk(ctx, tx, q, q.Offset, true, func(e *store.Email) bool {
			out = append(out, e)
			return len(out) < q.Limit
		})
	})
	if err != nil {
		return nil, wrap(err, "list emails")
	}
	if len(matches) > 0 {
		out = mergePage(out, matches, q.Limit)
	}
	return out, nil
}

// mergePage merges logged emails into a first page read from bbolt, both
// in list order, and keeps the first limit.
func mergePage(page []*store.Email, logged []pendingMatch, limit int) []*store.Email {
	out := make([]*store.Email, 0, min(len(page)+len(logged), limit))
	for len(out) < limit && (len(page) > 0 || len(logged) > 0) {
		if len(logged) > 0 && (len(page) == 0 || listOrder(logged[0].email, page[0]) > 0) {
			out = append(out, cloneEmails([]*store.Email{logged[0].email})[0])
			logged = logged[1:]
			continue
		}
		out = append(out, page[0])
		page = page[1:]
	}
	return out
}

// CountEmails implements store.Store. It returns Invalid when the query has
// no account and NotFound when q.Before names no email of the account.
//
// Without filters, Since or Before it reads the account's stats record, in
// constant time. Otherwise it walks the index ListEmails would and counts
// the entries that are also in the other filters' indexes, without reading
// the emails unless a subject or label filter needs their metadata. Its cost
// grows with the entries walked (BenchmarkCountAndCursor: at 100,000 emails,
// counting one recipient's 10,000 takes well under a millisecond; with a
// label filter, reading all 100,000, about 150 ms).
func (s *Store) CountEmails(ctx context.Context, q store.ListQuery) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, wrap(err, "count emails")
	}
	if q.AccountID == "" {
		return 0, store.Errorf(store.Invalid, "count: no account")
	}
	// Logged emails not in bbolt yet are counted; a count after one of them
	// (Before) waits for the applier.
	matches, cursor := queryPending(s.wal.pendingOf(q.AccountID), q)
	if cursor > 0 || len(matches) > 0 && q.Before != "" {
		if err := s.wal.waitApplied(ctx, max(cursor, lastLSN(matches)), true); err != nil {
			return 0, wrap(err, "count emails")
		}
		matches = nil
	}
	var n int64
	err := s.db.View(func(tx *bolt.Tx) error {
		n = int64(len(unappliedMatches(matches, readApplied(tx))))
		if q.Recipient == "" && q.Sender == "" && q.Status == "" && q.Subject == "" && q.Label == "" &&
			q.Since.IsZero() && q.Before == "" {
			stored, _, err := readStats(tx, q.AccountID)
			n += stored
			return err
		}
		return walk(ctx, tx, q, 0, false, func(*store.Email) bool {
			n++
			return true
		})
	})
	if err != nil {
		return 0, wrap(err, "count emails")
	}
	return n, nil
}

// walk calls visit with q's matches in list order, after skipping skip of
// them, until visit returns false or the matches end. Entries are tested
// against the other filters' indexes by key; the emails themselves are read
// only when a subject or label filter needs their metadata, or when load is
// true and the entry is not skipped (otherwise visit gets nil).
func walk(ctx context.Context, tx *bolt.Tx, q store.ListQuery, skip int64, load bool, visit func(*store.Email) bool) error {
	prefix, also, residual := plan(q)
	m := newMatcher(q)
	since, hasSince := q.Since.UnixMilli(), !q.Since.IsZero()
	// One cursor reads every email of the walk: Bucket.Get would make a
	// cursor, and grow its stack, for each.
	emails := tx.Bucket(bucketEmails).Cursor()
	// The emails visited are decoded into slices of records allocated a
	// page at a time; a record that does not match is decoded over.
	var recs []emailRecord
	batch := 16
	if q.Limit > 0 {
		batch = min(q.Limit, 100)
	}
	c := tx.Bucket(bucketIndex).Cursor()
	probe := tx.Bucket(bucketIndex).Cursor()
	key := appendAccount(nil, q.AccountID)
	acctLen := len(key)
	var probeKey []byte
	var k []byte
	if q.Before != "" {
		r, err := getRecord(tx, q.AccountID, store.NormalizeID(q.Before))
		if err != nil {
			return err
		}
		// The first entry below the cursor's place in this index, whether
		// or not the cursor's email is in it.
		if k, _ = c.Seek(indexKey(prefix, r.ReceivedAt.UnixMilli(), r.ID)); k == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev()
		}
	} else {
		k, _ = seekLast(c, prefix)
	}
	steps := 0
entries:
	for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
		if steps++; steps%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if len(k) < len(prefix)+timeLen {
			return internalf("list: short index key %x", k)
		}
		if hasSince && decodeTime(k[len(prefix):]) <= since {
			break
		}
		// The same receivedAt and id under another index's prefix.
		for _, p := range also {
			probeKey = append(append(probeKey[:0], p...), k[len(prefix):]...)
			if pk, _ := probe.Seek(probeKey); !bytes.Equal(pk, probeKey) {
				continue entries
			}
		}
		if !residual && skip > 0 {
			skip--
			continue
		}
		if !residual && !load {
			if !visit(nil) {
				break
			}
			continue
		}
		key = append(key[:acctLen], k[len(prefix)+timeLen:]...)
		ek, v := emails.Seek(key)
		if v == nil || !bytes.Equal(ek, key) {
			return internalf("list: index entry %x has no email", k)
		}
		if len(recs) == 0 {
			recs = make([]emailRecord, batch)
		}
		r := &recs[0]
		if err := decodeEmailInto(r, key, v); err != nil {
			return err
		}
		if residual && !m.match(&r.Email) {
			*r = emailRecord{}
			continue
		}
		recs = recs[1:]
		if skip > 0 {
			skip--
			continue
		}
		if !visit(&r.Email) {
			break
		}
	}
	return nil
}

// plan picks the index to walk for q (recipient, then sender, then status,
// then all of the account's emails), the prefixes of the other indexes an
// entry must also be in, and whether a subject or label filter remains to
// be checked on each email's metadata.
func plan(q store.ListQuery) (walked []byte, also [][]byte, residual bool) {
	var prefixes [][]byte
	if q.Recipient != "" {
		prefixes = append(prefixes, indexPrefix(q.AccountID, kindRecipient, store.NormalizeAddress(q.Recipient)))
	}
	if q.Sender != "" {
		prefixes = append(prefixes, indexPrefix(q.AccountID, kindSender, store.NormalizeAddress(q.Sender)))
	}
	if q.Status != "" {
		prefixes = append(prefixes, indexPrefix(q.AccountID, kindStatus, string(q.Status)))
	}
	if len(prefixes) == 0 {
		prefixes = append(prefixes, indexPrefix(q.AccountID, kindAll, ""))
	}
	return prefixes[0], prefixes[1:], q.Subject != "" || q.Label != ""
}

// matcher checks a query's subject and label filters on one email.
type matcher struct {
	subject, label string
}

func newMatcher(q store.ListQuery) matcher {
	return matcher{subject: strings.ToLower(q.Subject), label: q.Label}
}

func (m *matcher) match(e *store.Email) bool {
	switch {
	case m.subject != "" && (e.Subject == nil || !strings.Contains(strings.ToLower(*e.Subject), m.subject)),
		m.label != "" && !slices.Contains(e.Labels, m.label):
		return false
	}
	return true
}

// seekLast moves c to the last key that starts with prefix, or to the key
// before where it would be.
func seekLast(c *bolt.Cursor, prefix []byte) ([]byte, []byte) {
	end := prefixEnd(prefix)
	if end == nil {
		return c.Last()
	}
	if k, _ := c.Seek(end); k == nil {
		return c.Last()
	}
	return c.Prev()
}

// UpdateEmail implements store.Store. A zero u.UpdatedAt leaves UpdatedAt as
// it is. It returns Invalid for an unknown status.
func (s *Store) UpdateEmail(ctx context.Context, accountID, id string, u store.Update) (*store.Email, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrap(err, "update email")
	}
	if u.Status != nil && !u.Status.Valid() {
		return nil, store.Errorf(store.Invalid, "unknown status %q", *u.Status)
	}
	key := emailKey(accountID, id)
	if err := s.wal.settleKey(ctx, key); err != nil {
		return nil, wrap(err, "update email")
	}
	var result *store.Email
	var event uint64
	fn := func(tx *bolt.Tx) error {
		result = nil
		eb := writeBucket(tx, bucketEmails)
		v := eb.Get(key)
		if v == nil {
			// Not an error for the transaction: returning one would make
			// the group commit roll back and re-run every other write
			// sharing it.
			return nil
		}
		r, err := decodeEmail(key, v)
		if err != nil {
			return err
		}
		old := r.Status
		apply(&r.Email, u)
		if r.Status != old {
			ib := writeBucket(tx, bucketIndex)
			if err := ib.Delete(statusKey(&r.Email, old)); err != nil {
				return err
			}
			if err := ib.Put(statusKey(&r.Email, r.Status), []byte{}); err != nil {
				return err
			}
		}
		if err := eb.Put(key, encodeEmail(r)); err != nil {
			return err
		}
		result = &r.Email
		event, err = nextEvents(tx, 1)
		return err
	}
	if err := s.write(fn); err != nil {
		return nil, wrap(err, "update email")
	}
	if result == nil {
		return nil, store.ErrNotFound
	}
	s.publish(event, store.EmailUpdated, accountID, result.ID, result)
	return result, nil
}

func apply(e *store.Email, u store.Update) {
	if u.Labels != nil {
		e.Labels = append(make([]string, 0, len(*u.Labels)), *u.Labels...)
	}
	if u.Notes != nil {
		e.Notes = cloneString(u.Notes.Value)
	}
	if u.Status != nil {
		e.Status = *u.Status
	}
	if u.Subject != nil {
		e.Subject = cloneString(u.Subject.Value)
	}
	if u.Read != nil {
		e.Read = *u.Read
	}
	if !u.UpdatedAt.IsZero() {
		e.UpdatedAt = time.UnixMilli(u.UpdatedAt.UnixMilli()).UTC()
	}
}

func cloneString(p *string) *string {
	if p == nil {
		return nil
	}
	s := *p
	return &s
}

// DeleteEmail implements store.Store.
func (s *Store) DeleteEmail(ctx context.Context, accountID, id string) error {
	if err := ctx.Err(); err != nil {
		return wrap(err, "delete email")
	}
	key := emailKey(accountID, id)
	if err := s.wal.settleKey(ctx, key); err != nil {
		return wrap(err, "delete email")
	}
	var found bool
	var event uint64
	fn := func(tx *bolt.Tx) error {
		found = false
		eb := writeBucket(tx, bucketEmails)
		v := eb.Get(key)
		if v == nil {
			return nil // see UpdateEmail
		}
		r, err := decodeEmail(key, v)
		if err != nil {
			return err
		}
		if err := eb.Delete(key); err != nil {
			return err
		}
		ib := writeBucket(tx, bucketIndex)
		for _, k := range indexKeys(&r.Email) {
			if err := ib.Delete(k); err != nil {
				return err
			}
		}
		if err := release(tx, r.BodyID); err != nil {
			return err
		}
		if err := deleteChecks(tx, accountID, id); err != nil {
			return err
		}
		if err := addStats(tx, accountID, -1, -r.RawSize); err != nil {
			return err
		}
		found = true
		event, err = nextEvents(tx, 1)
		return err
	}
	if err := s.write(fn); err != nil {
		return wrap(err, "delete email")
	}
	if !found {
		return store.ErrNotFound
	}
	s.publish(event, store.EmailDeleted, accountID, id, nil)
	return nil
}

// release drops one reference to a body and deletes it with the last one.
// A body has a reference count only while more than one email shares it.
func release(tx *bolt.Tx, bodyID uint64) error {
	refs, bk := writeBucket(tx, bucketRefs), bodyKey(bodyID)
	if v := refs.Get(bk); v != nil {
		n, size := binary.Uvarint(v)
		switch {
		case size <= 0 || n == 0:
			return internalf("body %d has reference count %x", bodyID, v)
		case n > 2:
			return refs.Put(bk, binary.AppendUvarint(nil, n-1))
		case n == 2:
			return refs.Delete(bk)
		}
		if err := refs.Delete(bk); err != nil {
			return err
		}
	}
	bodies := writeBucket(tx, bucketBodies)
	if bodies.Get(bk) == nil {
		return internalf("body %d is missing", bodyID)
	}
	return bodies.Delete(bk)
}

// fillPercent is how full bbolt fills a page it splits, in the buckets that
// hold emails: their keys arrive in order (a body's sequence number, an
// email's time-ordered id, an index entry's time after its prefix), so
// pages are only ever appended to, and bbolt's default of one half would
// leave every page half empty.
const fillPercent = 0.95

// writeBucket returns the bucket name of tx, set to fill its pages to
// fillPercent. FillPercent is not stored: every write transaction sets it.
func writeBucket(tx *bolt.Tx, name []byte) *bolt.Bucket {
	b := tx.Bucket(name)
	b.FillPercent = fillPercent
	return b
}

// BodyCount returns the number of stored bodies. The conformance suite uses
// it to check that a body is removed with the last email that shares it.
func (s *Store) BodyCount(ctx context.Context) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, wrap(err, "count bodies")
	}
	if err := s.wal.settleAll(ctx); err != nil {
		return 0, wrap(err, "count bodies")
	}
	var n int
	err := s.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketBodies).Stats().KeyN
		return nil
	})
	return n, wrap(err, "count bodies")
}

// Ping implements store.Store: it returns Unavailable once the store is
// closed.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return wrap(err, "ping")
	}
	return wrap(s.db.View(func(*bolt.Tx) error { return nil }), "ping")
}

// Close implements store.Store. It waits for transactions in progress.
func (s *Store) Close() error {
	s.faults.close()
	walErr := s.wal.close()
	s.commits.close()
	s.events.Close()
	if err := s.db.Close(); err != nil {
		return wrap(err, "close")
	}
	return wrap(walErr, "close")
}

// write runs fn in a read-write transaction that is committed and synced
// when it returns nil. Concurrent writes share commits (commit.go), so fn
// may run more than once and must reset any result it reports.
func (s *Store) write(fn func(*bolt.Tx) error) error { return s.commits.write(fn) }

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
	cause := fmt.Errorf("boltv4: %s: %w", op, err)
	if errors.Is(err, errCorrupt) {
		return store.Wrap(store.Internal, cause, "store error")
	}
	switch code := codeOfDBError(err); code {
	case store.Unavailable:
		return store.Wrap(code, cause, "store unavailable")
	case store.TooLarge:
		return store.Wrap(code, cause, "email too large for the store")
	default:
		return store.Wrap(code, cause, "store error")
	}
}

// internalf returns an Internal error: the store holds something it did not
// expect, and only the log should say what.
func internalf(format string, args ...any) error {
	return store.Wrap(store.Internal, fmt.Errorf("boltv4: "+format, args...), "store error")
}

func codeOfDBError(err error) store.Code {
	var errno syscall.Errno
	var pathErr *fs.PathError
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, berrors.ErrMaxSizeReached):
		return store.Full
	case errors.Is(err, berrors.ErrDatabaseNotOpen),
		errors.Is(err, context.Canceled),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, berrors.ErrTimeout),
		errors.Is(err, os.ErrPermission),
		errors.As(err, &pathErr),
		errors.As(err, &errno):
		return store.Unavailable
	case errors.Is(err, berrors.ErrValueTooLarge), errors.Is(err, berrors.ErrKeyTooLarge):
		return store.TooLarge
	}
	return store.Internal
}
