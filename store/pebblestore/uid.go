package pebblestore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mailsink/mailsink/store"
)

// UIDs (store.Mailboxes). Each account has, besides the keys of keys.go:
//
//	'a' account 'q'            -> the numbering: validity (4 bytes) | last UID
//	                              given (4) | uvarint count of the emails numbered
//	'a' account 'n' uid        -> id: the UID index, uid 4 bytes big-endian
//	'a' account 'm' id         -> uid (4 bytes): the email's UID, for its delete
//
// CreateEmails numbers its emails under s.mu, in the change that stores
// them, so UIDs follow the order creates commit in and no email is seen
// without its UID. DeleteEmail removes both entries. The numbering is never
// removed, so a UID is never given twice. Emails without a UID (a data
// directory migrated from the earlier embedded store) are noticed by
// MailboxUIDs when the account's count differs from the count numbered,
// and numbered then, oldest first, in batches. The validity is the Unix
// second the numbering began on disk; in memory, where nothing outlives
// the process, a random number, so that two starts in one second differ.
const (
	partUIDs     byte = 'q'
	partUIDIndex byte = 'n'
	partUIDOf    byte = 'm'
)

func uidsKey(accountID string) []byte { return accountKey(accountID, partUIDs, 0) }

func uidIndexKey(accountID string, uid uint32) []byte {
	return binary.BigEndian.AppendUint32(accountKey(accountID, partUIDIndex, 4), uid)
}

func uidOfKey(accountID, id string) []byte {
	return append(accountKey(accountID, partUIDOf, len(id)), id...)
}

// numbering is an account's 'q' record.
type numbering struct {
	validity, last uint32
	numbered       uint64
}

// readNumbering returns the account's numbering, a new one when it has
// none (not written until a change writes it).
func (s *Store) readNumbering(accountID string) (numbering, error) {
	v, err := s.get(uidsKey(accountID))
	if err != nil {
		return numbering{}, err
	}
	if v == nil {
		return numbering{validity: s.newValidity()}, nil
	}
	if len(v) < 9 {
		return numbering{}, internalf("numbering of account %q: %w", accountID, errCorrupt)
	}
	n, size := binary.Uvarint(v[8:])
	if size <= 0 {
		return numbering{}, internalf("numbering of account %q: %w", accountID, errCorrupt)
	}
	return numbering{validity: binary.BigEndian.Uint32(v), last: binary.BigEndian.Uint32(v[4:]), numbered: n}, nil
}

func (s *Store) newValidity() uint32 {
	if !s.memory {
		return uint32(time.Now().Unix())
	}
	for {
		var b [4]byte
		rand.Read(b[:])
		if v := binary.BigEndian.Uint32(b[:]); v != 0 {
			return v
		}
	}
}

func (n numbering) encode() []byte {
	v := binary.BigEndian.AppendUint32(nil, n.validity)
	v = binary.BigEndian.AppendUint32(v, n.last)
	return binary.AppendUvarint(v, n.numbered)
}

// number gives ids the next UIDs of the account in b; called by change's
// fill, under s.mu.
func (s *Store) number(b *pebble.Batch, accountID string, ids []string) error {
	n, err := s.readNumbering(accountID)
	if err != nil {
		return err
	}
	for _, id := range ids {
		n.last++
		n.numbered++
		uid := binary.BigEndian.AppendUint32(nil, n.last)
		if err := b.Set(uidIndexKey(accountID, n.last), []byte(id), nil); err != nil {
			return err
		}
		if err := b.Set(uidOfKey(accountID, id), uid, nil); err != nil {
			return err
		}
	}
	return b.Set(uidsKey(accountID), n.encode(), nil)
}

// unnumber removes id's UID in b, if it has one; called by change's fill.
func (s *Store) unnumber(b *pebble.Batch, accountID, id string) error {
	v, err := s.get(uidOfKey(accountID, id))
	if err != nil || v == nil {
		return err
	}
	if len(v) != 4 {
		return internalf("UID of email %s: %w", id, errCorrupt)
	}
	n, err := s.readNumbering(accountID)
	if err != nil {
		return err
	}
	if n.numbered > 0 {
		n.numbered--
	}
	if err := b.Delete(uidOfKey(accountID, id), nil); err != nil {
		return err
	}
	if err := b.Delete(uidIndexKey(accountID, binary.BigEndian.Uint32(v)), nil); err != nil {
		return err
	}
	return b.Set(uidsKey(accountID), n.encode(), nil)
}

// backfillBatch is how many emails one change numbers when emails without
// a UID are found.
const backfillBatch = 500

// MailboxUIDs implements store.Mailboxes. It returns Invalid when q.Limit is
// not in 1..store.MaxUIDPage.
func (s *Store) MailboxUIDs(ctx context.Context, q store.UIDQuery) (store.UIDPage, error) {
	if q.Limit < 1 || q.Limit > store.MaxUIDPage {
		return store.UIDPage{}, store.Errorf(store.Invalid, "limit must be between 1 and %d", store.MaxUIDPage)
	}
	if err := s.enter(ctx, "read UIDs"); err != nil {
		return store.UIDPage{}, err
	}
	defer s.leave()
	if err := s.backfill(ctx, q.AccountID); err != nil {
		return store.UIDPage{}, wrap(err, "number emails")
	}
	n, err := s.readNumbering(q.AccountID)
	if err != nil {
		return store.UIDPage{}, wrap(err, "read UIDs")
	}
	if n.last == 0 {
		// An account that never had mail: keep its validity from now on,
		// so that a client sees the same one before and after.
		if _, err := s.change(func(b *pebble.Batch) (int, error) {
			cur, err := s.readNumbering(q.AccountID)
			if err == nil && cur.last == 0 {
				if v, _ := s.get(uidsKey(q.AccountID)); v == nil {
					err = b.Set(uidsKey(q.AccountID), cur.encode(), nil)
				}
			}
			return 0, err
		}); err != nil {
			return store.UIDPage{}, wrap(err, "read UIDs")
		}
		if n, err = s.readNumbering(q.AccountID); err != nil {
			return store.UIDPage{}, wrap(err, "read UIDs")
		}
	}
	page := store.UIDPage{UIDValidity: n.validity, UIDNext: n.last + 1, Emails: []store.EmailUID{}}
	lower := uidIndexKey(q.AccountID, q.After+1)
	upper := prefixEnd(accountKey(q.AccountID, partUIDIndex, 0))
	if q.Before != 0 {
		upper = uidIndexKey(q.AccountID, q.Before)
	}
	if q.After == 1<<32-1 || bytes.Compare(lower, upper) >= 0 {
		return page, nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return store.UIDPage{}, wrap(err, "read UIDs")
	}
	defer it.Close()
	valid := it.First
	next := it.Next
	if q.Newest {
		valid, next = it.Last, it.Prev
	}
	for ok := valid(); ok && len(page.Emails) < q.Limit; ok = next() {
		k := it.Key()
		page.Emails = append(page.Emails, store.EmailUID{UID: binary.BigEndian.Uint32(k[len(k)-4:]), ID: string(it.Value())})
	}
	if err := it.Error(); err != nil {
		return store.UIDPage{}, wrap(err, "read UIDs")
	}
	if q.Newest {
		for i, j := 0, len(page.Emails)-1; i < j; i, j = i+1, j-1 {
			page.Emails[i], page.Emails[j] = page.Emails[j], page.Emails[i]
		}
	}
	return page, nil
}

// backfill numbers the account's emails that have no UID, oldest first,
// when its count says there are some.
func (s *Store) backfill(ctx context.Context, accountID string) error {
	count, _, err := s.readStats(s.db, accountID)
	if err != nil {
		return err
	}
	n, err := s.readNumbering(accountID)
	if err != nil || uint64(count) == n.numbered {
		return err
	}
	prefix := indexPrefix(accountID, kindAll, "")
	from := prefix
	for from != nil {
		if err := ctx.Err(); err != nil {
			return store.Wrap(store.Unavailable, err, "numbering emails")
		}
		_, err := s.change(func(b *pebble.Batch) (int, error) {
			it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: from, UpperBound: prefixEnd(prefix)})
			if err != nil {
				return 0, err
			}
			defer it.Close()
			var ids []string
			seen := 0
			from = nil
			for ok := it.First(); ok; ok = it.Next() {
				if seen == backfillBatch {
					from = append([]byte(nil), it.Key()...)
					break
				}
				seen++
				id := string(it.Key()[len(prefix)+timeLen:])
				if found, err := s.has(uidOfKey(accountID, id)); err != nil {
					return 0, err
				} else if !found {
					ids = append(ids, id)
				}
			}
			if err := it.Error(); err != nil || len(ids) == 0 {
				return 0, err
			}
			return 0, s.number(b, accountID, ids)
		})
		if err != nil {
			return err
		}
	}
	// Every email walked has a UID now: the count numbered is the count
	// (read together under s.mu, so creates meanwhile do not matter).
	_, err = s.change(func(b *pebble.Batch) (int, error) {
		count, _, err := s.readStats(s.db, accountID)
		if err != nil {
			return 0, err
		}
		n, err := s.readNumbering(accountID)
		if err != nil || uint64(count) == n.numbered {
			return 0, err
		}
		n.numbered = uint64(count)
		return 0, b.Set(uidsKey(accountID), n.encode(), nil)
	})
	return err
}
