package boltv4

import (
	"bytes"
	"context"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"

	"github.com/mailsink/mailsink/store"
)

// maxOldest is the largest batch OldestEmails returns (store.Pruner).
const maxOldest = 100

// AccountStats implements store.Stats from the account's stats record, which
// every create and delete updates in its own transaction.
func (s *Store) AccountStats(ctx context.Context, accountID string) (emails, rawBytes int64, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, wrap(err, "account stats")
	}
	// Creates logged but not applied count too: a quota is checked
	// against this before each delivery.
	pending := s.wal.pendingOf(accountID)
	err = s.db.View(func(tx *bolt.Tx) error {
		emails, rawBytes, err = readStats(tx, accountID)
		for _, o := range unapplied(pending, readApplied(tx)) {
			emails += int64(len(o.op.emails))
			rawBytes += o.op.rawBytes
		}
		return err
	})
	if err != nil {
		return 0, 0, wrap(err, "account stats")
	}
	return emails, rawBytes, nil
}

// OldestEmails implements store.Pruner: it walks the account's index of all
// emails forward from its oldest entry, after reading the account's count
// from its stats record in the same transaction when keep is not 0.
func (s *Store) OldestEmails(ctx context.Context, accountID string, keep, skip int64, limit int) ([]*store.Email, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrap(err, "oldest emails")
	}
	switch {
	case limit < 1 || limit > maxOldest:
		return nil, store.Errorf(store.Invalid, "oldest: limit %d is not from 1 to %d", limit, maxOldest)
	case keep < 0:
		return nil, store.Errorf(store.Invalid, "oldest: negative keep %d", keep)
	case skip < 0:
		return nil, store.Errorf(store.Invalid, "oldest: negative skip %d", skip)
	}
	// Logged creates are applied first (any of them may be among the
	// oldest), unless the applier fails: retention must run on a full disk.
	if err := s.wal.settleAccount(ctx, accountID); err != nil {
		return nil, wrap(err, "oldest emails")
	}
	pending := s.wal.pendingOf(accountID)
	var out []*store.Email
	err := s.db.View(func(tx *bolt.Tx) error {
		n := int64(limit)
		if keep > 0 {
			count, _, err := readStats(tx, accountID)
			if err != nil {
				return err
			}
			for _, o := range unapplied(pending, readApplied(tx)) {
				count += int64(len(o.op.emails)) // the applier fails: they count towards keep
			}
			n = min(n, count-keep-skip)
		}
		if n <= 0 {
			return nil
		}
		out = make([]*store.Email, 0, n)
		emails := tx.Bucket(bucketEmails)
		prefix := indexPrefix(accountID, kindAll, "")
		key := appendAccount(nil, accountID)
		acctLen := len(key)
		c := tx.Bucket(bucketIndex).Cursor()
		skipped := int64(0)
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			if skipped < skip {
				skipped++
				continue
			}
			if len(k) < len(prefix)+timeLen {
				return internalf("oldest: short index key %x", k)
			}
			key = append(key[:acctLen], k[len(prefix)+timeLen:]...)
			v := emails.Get(key)
			if v == nil {
				return internalf("oldest: index entry %x has no email", k)
			}
			r, err := decodeEmail(key, v)
			if err != nil {
				return err
			}
			out = append(out, &r.Email)
			if int64(len(out)) == n {
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap(err, "oldest emails")
	}
	return out, nil
}

// readStats returns the totals of the account in tx.
func readStats(tx *bolt.Tx, accountID string) (emails, rawBytes int64, err error) {
	v := tx.Bucket(bucketStats).Get(appendAccount(nil, accountID))
	if v == nil {
		return 0, 0, nil
	}
	emails, n := binary.Varint(v)
	if n <= 0 {
		return 0, 0, internalf("stats of account %q: %w", accountID, errCorrupt)
	}
	rawBytes, m := binary.Varint(v[n:])
	if m <= 0 {
		return 0, 0, internalf("stats of account %q: %w", accountID, errCorrupt)
	}
	return emails, rawBytes, nil
}

// addStats adds emails and rawBytes, which may be negative, to the account's
// totals in tx, and removes the record when no email is left.
func addStats(tx *bolt.Tx, accountID string, emails, rawBytes int64) error {
	n, size, err := readStats(tx, accountID)
	if err != nil {
		return err
	}
	n, size = n+emails, size+rawBytes
	b, k := tx.Bucket(bucketStats), appendAccount(nil, accountID)
	switch {
	case n < 0:
		return internalf("stats of account %q: count would be %d", accountID, n)
	case n == 0:
		return b.Delete(k)
	}
	v := binary.AppendVarint(nil, n)
	return b.Put(k, binary.AppendVarint(v, size))
}

// rebuildStats computes every account's totals from its emails: it upgrades
// a file written before the stats bucket existed.
func rebuildStats(tx *bolt.Tx) error {
	if err := tx.DeleteBucket(bucketStats); err != nil {
		return err
	}
	if _, err := tx.CreateBucket(bucketStats); err != nil {
		return err
	}
	type totals struct{ emails, rawBytes int64 }
	all := map[string]*totals{}
	err := tx.Bucket(bucketEmails).ForEach(func(k, v []byte) error {
		r, err := decodeEmail(k, v)
		if err != nil {
			return err
		}
		t := all[r.AccountID]
		if t == nil {
			t = &totals{}
			all[r.AccountID] = t
		}
		t.emails++
		t.rawBytes += r.RawSize
		return nil
	})
	if err != nil {
		return err
	}
	for id, t := range all {
		if err := addStats(tx, id, t.emails, t.rawBytes); err != nil {
			return err
		}
	}
	return nil
}
