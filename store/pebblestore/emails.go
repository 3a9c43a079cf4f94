package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mailsink/mailsink/store"
)

// CreateEmails implements store.Store. It returns Invalid for an empty slice,
// a nil body or email, an email without id, account or valid status, emails
// of different accounts or a repeated id, Conflict when an id already
// exists in the account, and Full when the store has no room for them.
func (s *Store) CreateEmails(ctx context.Context, body *store.Body, emails []*store.Email) error {
	if err := validateCreate(body, emails); err != nil {
		return err
	}
	if err := s.enter(ctx, "create emails"); err != nil {
		return err
	}
	defer s.leave()
	accountID := emails[0].AccountID
	// A body of one email has that email's id, and goes with it: no
	// other create can meet it. A shared body has an id of its own.
	bodyID := emails[0].ID
	if len(emails) > 1 {
		bodyID = store.NewID()
	}
	bodyRec := encodeBody(&s.zip, body)
	records := make([][]byte, len(emails))
	keys := make([][]byte, len(emails))
	var rawBytes int64
	size := int64(len(bodyRec))
	for i, e := range emails {
		keys[i] = emailKey(accountID, e.ID)
		records[i] = encodeEmail(&emailRecord{Email: *e, BodyID: bodyID})
		rawBytes += e.RawSize
		size += int64(len(records[i]) + 4*(len(keys[i])+48+len(indexValue(records[i]))))
	}
	if err := s.room.admit(size); err != nil {
		return err
	}
	// The writes are made before the lock is taken; under it, only the
	// checks and the account's totals.
	b := s.db.NewBatch()
	err := b.Set(bodyKey(accountID, bodyID), bodyRec, nil)
	if len(emails) > 1 {
		err = errors.Join(err, b.Set(refsKey(accountID, bodyID), binary.AppendUvarint(nil, uint64(len(emails))), nil))
	}
	for i, e := range emails {
		err = errors.Join(err, b.Set(keys[i], records[i], nil))
		for _, k := range indexKeys(e) {
			err = errors.Join(err, b.Set(k, indexValue(records[i]), nil))
		}
	}
	if err != nil {
		b.Close()
		return wrap(err, "create emails")
	}
	first, err := s.changeBatch(b, func(b *pebble.Batch) (int, error) {
		for i, e := range emails {
			if found, err := s.has(keys[i]); err != nil || found {
				if err == nil {
					err = store.Errorf(store.Conflict, "email %s already exists", e.ID)
				}
				return 0, err
			}
		}
		ids := make([]string, len(emails))
		for i, e := range emails {
			ids[i] = e.ID
		}
		if err := s.number(b, accountID, ids); err != nil {
			return 0, err
		}
		return len(emails), s.addStats(b, accountID, int64(len(emails)), rawBytes)
	})
	if err != nil {
		return wrap(err, "create emails")
	}
	for i, e := range emails {
		s.publish(first+uint64(i), store.EmailCreated, accountID, e.ID, e)
	}
	return nil
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

// publish announces a change numbered seq by change. Writers finish in
// any order; the hub delivers by number, so in the order of their batches.
func (s *Store) publish(seq uint64, typ store.EventType, accountID, id string, e *store.Email) {
	if e != nil {
		c := *e
		c.Labels = append(make([]string, 0, len(e.Labels)), e.Labels...)
		e = &c
	}
	s.events.PublishInOrder(seq, store.Event{Type: typ, AccountID: accountID, EmailID: id, Email: e})
}

// Subscribe implements store.Events.
func (s *Store) Subscribe(accountID string) store.Subscription { return s.events.Subscribe(accountID) }

// eventWait bounds how long EventsAfter waits for events numbered before
// it to be published.
const eventWait = time.Second

// EventsAfter implements store.Events from this process's history, which
// starts empty when the store is opened.
func (s *Store) EventsAfter(ctx context.Context, accountID, afterID string) ([]store.Event, bool, error) {
	if err := s.enter(ctx, "events after"); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	seq := s.seq
	s.mu.Unlock()
	s.leave()
	// The changes numbered up to seq are in the memtable; their writers
	// publish once they are synced. A number whose publisher is slow must
	// not hold the reader for long.
	wait, cancel := context.WithTimeout(ctx, eventWait)
	defer cancel()
	if err := s.events.WaitSequence(wait, seq); err != nil && ctx.Err() != nil {
		return nil, false, wrap(ctx.Err(), "events after")
	}
	return s.events.After(accountID, afterID)
}

// GetEmail implements store.Store.
func (s *Store) GetEmail(ctx context.Context, accountID, id string) (*store.Email, error) {
	if err := s.enter(ctx, "get email"); err != nil {
		return nil, err
	}
	defer s.leave()
	r, err := s.getRecord(accountID, id)
	if err != nil {
		return nil, wrap(err, "get email")
	}
	return &r.Email, nil
}

// getRecord returns the record of the email id in the account, or NotFound.
func (s *Store) getRecord(accountID, id string) (*emailRecord, error) {
	k := emailKey(accountID, id)
	v, closer, err := s.db.Get(k)
	if err == pebble.ErrNotFound {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return decodeEmail(k, v)
}

// GetBody implements store.Store.
func (s *Store) GetBody(ctx context.Context, accountID, id string) (*store.Body, error) {
	if err := s.enter(ctx, "get body"); err != nil {
		return nil, err
	}
	defer s.leave()
	// Email and body from one view: a delete between the two reads must
	// not make the body look missing.
	snap := s.db.NewSnapshot()
	defer snap.Close()
	k := emailKey(accountID, id)
	v, closer, err := snap.Get(k)
	if err == pebble.ErrNotFound {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, wrap(err, "get body")
	}
	r, err := decodeEmail(k, v)
	closer.Close()
	if err != nil {
		return nil, wrap(err, "get body")
	}
	v, closer, err = snap.Get(bodyKey(accountID, r.BodyID))
	if err == pebble.ErrNotFound {
		return nil, internalf("email %s: body %s is missing", id, r.BodyID)
	}
	if err != nil {
		return nil, wrap(err, "get body")
	}
	defer closer.Close()
	body, err := decodeBody(v)
	return body, wrap(err, "get body")
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
	switch {
	case q.AccountID == "":
		return nil, store.Errorf(store.Invalid, "list: no account")
	case q.Limit < 1:
		return nil, store.Errorf(store.Invalid, "list: limit %d is below 1", q.Limit)
	case q.Offset < 0:
		return nil, store.Errorf(store.Invalid, "list: negative offset %d", q.Offset)
	}
	if err := s.enter(ctx, "list emails"); err != nil {
		return nil, err
	}
	defer s.leave()
	out := make([]*store.Email, 0, min(q.Limit, 100))
	err := s.walk(ctx, q, q.Offset, true, func(e *store.Email) bool {
		out = append(out, e)
		return len(out) < q.Limit
	})
	if err != nil {
		return nil, wrap(err, "list emails")
	}
	return out, nil
}

// CountEmails implements store.Store. It returns Invalid when the query has
// no account and NotFound when q.Before names no email of the account.
//
// Without filters, Since or Before it reads the account's totals, in
// constant time. Otherwise it walks the index ListEmails would and counts
// the entries that are also in the other filters' indexes, without reading
// the emails unless a subject or label filter needs their metadata.
func (s *Store) CountEmails(ctx context.Context, q store.ListQuery) (int64, error) {
	if q.AccountID == "" {
		return 0, store.Errorf(store.Invalid, "count: no account")
	}
	if err := s.enter(ctx, "count emails"); err != nil {
		return 0, err
	}
	defer s.leave()
	if q.Recipient == "" && q.Sender == "" && q.Status == "" && q.Subject == "" && q.Label == "" &&
		q.Since.IsZero() && q.Before == "" {
		n, _, err := s.readStats(s.db, q.AccountID)
		return n, wrap(err, "count emails")
	}
	var n int64
	err := s.walk(ctx, q, 0, false, func(*store.Email) bool {
		n++
		return true
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
// true and the entry is not skipped (otherwise visit gets nil). Everything
// it reads is of one view of the store.
func (s *Store) walk(ctx context.Context, q store.ListQuery, skip int64, load bool, visit func(*store.Email) bool) error {
	prefix, also, residual := plan(q)
	m := newMatcher(q)
	since, hasSince := q.Since.UnixMilli(), !q.Since.IsZero()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return err
	}
	defer it.Close()
	// The emails and the other indexes are read from clones, which see
	// what it sees.
	acct := accountKey(q.AccountID, partEmail, 0)
	acct = acct[:len(acct)-1]
	others, err := it.Clone(pebble.CloneOptions{IterOptions: &pebble.IterOptions{LowerBound: acct, UpperBound: prefixEnd(acct)}})
	if err != nil {
		return err
	}
	defer others.Close()
	// The emails visited are decoded into slices of records allocated a
	// page at a time; a record that does not match is decoded over.
	var recs []emailRecord
	batch := 16
	if q.Limit > 0 {
		batch = min(q.Limit, 100)
	}
	key := emailKey(q.AccountID, "")
	keyLen := len(key)
	page := listPage{size: batch, prefix: key[:keyLen:keyLen],
		ids: make([]byte, 0, batch*40), idEnds: make([]int, 0, batch),
		values: make([]byte, 0, batch*128), valueEnds: make([]int, 0, batch),
		order: make([]int, 0, batch), key: make([]byte, 0, keyLen+40)}
	var probeKey []byte
	var valid bool
	if q.Before != "" {
		cursor := emailKey(q.AccountID, store.NormalizeID(q.Before))
		if found, err := seekExact(others, cursor); !found {
			if err != nil {
				return err
			}
			return store.ErrNotFound
		}
		r, err := decodeEmail(cursor, others.Value())
		if err != nil {
			return err
		}
		// The first entry below the cursor's place in this index, whether
		// or not the cursor's email is in it.
		valid = it.SeekLT(indexKey(prefix, r.ReceivedAt.UnixMilli(), r.ID))
	} else {
		valid = it.Last()
	}
	steps := 0
entries:
	for ; valid; valid = it.Prev() {
		if steps++; steps%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		k := it.Key()
		if len(k) < len(prefix)+timeLen {
			return internalf("list: short index key %x", k)
		}
		if hasSince && decodeTime(k[len(prefix):]) <= since {
			break
		}
		// The same receivedAt and id under another index's prefix.
		for _, p := range also {
			probeKey = append(append(probeKey[:0], p...), k[len(prefix):]...)
			if found, err := seekExact(others, probeKey); !found {
				if err != nil {
					return err
				}
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
		// The entry's copy of the record, if it has one (indexValue).
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if !residual {
			// A page's emails are read together (listPage).
			page.add(k[len(prefix)+timeLen:], v)
			if !page.full() {
				continue
			}
			more, err := page.load(others, visit)
			if err != nil || !more {
				return err
			}
			continue
		}
		key = append(key[:keyLen], k[len(prefix)+timeLen:]...)
		if len(v) == 0 {
			if found, err := seekExact(others, key); !found {
				if err != nil {
					return err
				}
				return internalf("list: index entry %x has no email", k)
			}
			v = others.Value()
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
	if err := it.Error(); err != nil {
		return err
	}
	_, err = page.load(others, visit)
	return err
}

// listPage gathers a page of emails: their ids and their index entries'
// copies of their records (indexValue), copied as the walk finds them, and
// reads them once the page is full. An email whose entry holds no copy (an
// entry of schema version 1, or a long record) is looked up by id. The walk
// finds the page newest first, which is descending id order; those lookups
// are made in ascending order, in which each seek can start from where the
// last one ended (Pebble's TrySeekUsingNext) rather than from the top of
// every level.
type listPage struct {
	// size is how many emails make a full page.
	size int
	// prefix is an email key without its id.
	prefix []byte
	// ids holds the page's ids one after another, and idEnds where each
	// ends.
	ids    []byte
	idEnds []int
	// values holds the entries' copies one after another (an empty one
	// for an entry without), and valueEnds where each ends.
	values    []byte
	valueEnds []int
	// order and key are reused by each read of the page.
	order []int
	key   []byte
}

// add adds the email id, whose index entry holds value, to the page.
func (l *listPage) add(id, value []byte) {
	l.ids = append(l.ids, id...)
	l.idEnds = append(l.idEnds, len(l.ids))
	l.values = append(l.values, value...)
	l.valueEnds = append(l.valueEnds, len(l.values))
}

// full reports whether the page has its size.
func (l *listPage) full() bool { return len(l.idEnds) == l.size }

// nth returns the i-th of the byte strings held one after another in b,
// whose ends are ends.
func nth(b []byte, ends []int, i int) []byte {
	start := 0
	if i > 0 {
		start = ends[i-1]
	}
	return b[start:ends[i]]
}

// load reads the page's emails, looking up with it those whose entries
// held no copy, and visits them in the order added until visit returns
// false; it reports whether visit wants more, and empties the page.
func (l *listPage) load(it *pebble.Iterator, visit func(*store.Email) bool) (bool, error) {
	n := len(l.idEnds)
	if n == 0 {
		return true, nil
	}
	defer func() {
		l.ids, l.idEnds, l.values, l.valueEnds = l.ids[:0], l.idEnds[:0], l.values[:0], l.valueEnds[:0]
	}()
	// Each page gets records of its own: visit may keep them.
	recs := make([]emailRecord, n)
	l.order = l.order[:0]
	for i := range n {
		v := nth(l.values, l.valueEnds, i)
		if len(v) == 0 {
			l.order = append(l.order, i)
			continue
		}
		l.key = append(append(l.key[:0], l.prefix...), nth(l.ids, l.idEnds, i)...)
		if err := decodeEmailInto(&recs[i], l.key, v); err != nil {
			return false, err
		}
	}
	slices.SortFunc(l.order, func(a, b int) int { return bytes.Compare(nth(l.ids, l.idEnds, a), nth(l.ids, l.idEnds, b)) })
	for _, i := range l.order {
		id := nth(l.ids, l.idEnds, i)
		l.key = append(append(l.key[:0], l.prefix...), id...)
		if found, err := seekExact(it, l.key); !found {
			if err != nil {
				return false, err
			}
			return false, internalf("list: index entry of %q has no email", id)
		}
		if err := decodeEmailInto(&recs[i], l.key, it.Value()); err != nil {
			return false, err
		}
	}
	for i := range recs {
		if !visit(&recs[i].Email) {
			return false, nil
		}
	}
	return true, nil
}

// seekExact positions it at key and reports whether key is there; when it
// is not, err is the iterator's error, if any.
func seekExact(it *pebble.Iterator, key []byte) (found bool, err error) {
	if it.SeekPrefixGE(key) && bytes.Equal(it.Key(), key) {
		return true, nil
	}
	return false, it.Error()
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

// UpdateEmail implements store.Store. A zero u.UpdatedAt leaves UpdatedAt as
// it is. It returns Invalid for an unknown status.
func (s *Store) UpdateEmail(ctx context.Context, accountID, id string, u store.Update) (*store.Email, error) {
	if u.Status != nil && !u.Status.Valid() {
		return nil, store.Errorf(store.Invalid, "unknown status %q", *u.Status)
	}
	if err := s.enter(ctx, "update email"); err != nil {
		return nil, err
	}
	defer s.leave()
	key := emailKey(accountID, id)
	var result *store.Email
	event, err := s.change(func(b *pebble.Batch) (int, error) {
		r, err := s.getRecord(accountID, id)
		if err != nil {
			return 0, err
		}
		old := r.Status
		apply(&r.Email, u)
		if r.Status != old {
			if err := b.Delete(statusKey(&r.Email, old), nil); err != nil {
				return 0, err
			}
		}
		result = &r.Email
		rec := encodeEmail(r)
		// The index entries hold the record too (indexValue), the new
		// status's entry included.
		for _, k := range indexKeys(&r.Email) {
			if err := b.Set(k, indexValue(rec), nil); err != nil {
				return 0, err
			}
		}
		return 1, b.Set(key, rec, nil)
	})
	if err != nil {
		return nil, wrap(err, "update email")
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
	if err := s.enter(ctx, "delete email"); err != nil {
		return err
	}
	defer s.leave()
	// What the delete frees, for the reclaimer once it is committed: told
	// before, it could compact the span before the tombstone is there and
	// count the space as given back.
	var freed []byte
	var size int64
	event, err := s.change(func(b *pebble.Batch) (int, error) {
		r, err := s.getRecord(accountID, id)
		if err != nil {
			return 0, err
		}
		if err := b.Delete(emailKey(accountID, id), nil); err != nil {
			return 0, err
		}
		for _, k := range indexKeys(&r.Email) {
			if err := b.Delete(k, nil); err != nil {
				return 0, err
			}
		}
		if freed, size, err = s.release(b, accountID, r); err != nil {
			return 0, err
		}
		if err := s.deleteChecks(b, accountID, id); err != nil {
			return 0, err
		}
		if err := s.unnumber(b, accountID, id); err != nil {
			return 0, err
		}
		return 1, s.addStats(b, accountID, -1, -r.RawSize)
	})
	if err != nil {
		return wrap(err, "delete email")
	}
	if freed != nil {
		s.reclaim.deleted(freed, size)
	}
	s.publish(event, store.EmailDeleted, accountID, id, nil)
	return nil
}

// release drops one reference to the body of r and deletes the body with
// the last one; it then returns the body's key and about its size. A body
// has a reference count only while more than one email shares it. Called
// by change's fill.
func (s *Store) release(b *pebble.Batch, accountID string, r *emailRecord) (freed []byte, size int64, err error) {
	rk := refsKey(accountID, r.BodyID)
	v, err := s.get(rk)
	if err != nil {
		return nil, 0, err
	}
	if v != nil {
		n, size := binary.Uvarint(v)
		switch {
		case size <= 0 || n == 0:
			return nil, 0, internalf("body %s has reference count %x", r.BodyID, v)
		case n > 2:
			return nil, 0, b.Set(rk, binary.AppendUvarint(nil, n-1), nil)
		case n == 2:
			return nil, 0, b.Delete(rk, nil)
		}
		if err := b.Delete(rk, nil); err != nil {
			return nil, 0, err
		}
	}
	// The tombstone carries the size of what it deletes, so that Pebble
	// knows the space a compaction would give back. The record is about
	// the raw source's size, or less when it was compressed.
	n := uint32(min(r.RawSize, 1<<31) + 64)
	k := bodyKey(accountID, r.BodyID)
	return k, int64(n), b.DeleteSized(k, n, nil)
}

// BodyCount returns the number of stored bodies. The conformance suite uses
// it to check that a body is removed with the last email that shares it.
func (s *Store) BodyCount(ctx context.Context) (int, error) {
	if err := s.enter(ctx, "count bodies"); err != nil {
		return 0, err
	}
	defer s.leave()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagAccount}, UpperBound: []byte{tagAccount + 1}})
	if err != nil {
		return 0, wrap(err, "count bodies")
	}
	defer it.Close()
	n := 0
	for valid := it.First(); valid; valid = it.Next() {
		if _, rest, ok := accountOf(it.Key()); ok {
			k := it.Key()
			if k[len(k)-len(rest)-1] == partBody {
				n++
			}
		}
	}
	return n, wrap(it.Error(), "count bodies")
}
