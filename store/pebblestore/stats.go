package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mailsink/mailsink/store"
)

// maxOldest is the largest batch OldestEmails returns (store.Pruner).
const maxOldest = 100

// AccountStats implements store.Stats from the account's totals, which
// every create and delete updates in its own batch.
func (s *Store) AccountStats(ctx context.Context, accountID string) (emails, rawBytes int64, err error) {
	if err := s.enter(ctx, "account stats"); err != nil {
		return 0, 0, err
	}
	defer s.leave()
	emails, rawBytes, err = s.readStats(s.db, accountID)
	return emails, rawBytes, wrap(err, "account stats")
}

// readStats returns the totals of the account as r holds them.
func (s *Store) readStats(r pebble.Reader, accountID string) (emails, rawBytes int64, err error) {
	v, closer, err := r.Get(statsKey(accountID))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	defer closer.Close()
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
// totals in b, and removes them when no email is left. Called by change's
// fill.
func (s *Store) addStats(b *pebble.Batch, accountID string, emails, rawBytes int64) error {
	n, size, err := s.readStats(s.db, accountID)
	if err != nil {
		return err
	}
	n, size = n+emails, size+rawBytes
	switch {
	case n < 0:
		return internalf("stats of account %q: count would be %d", accountID, n)
	case n == 0:
		return b.Delete(statsKey(accountID), nil)
	}
	v := binary.AppendVarint(nil, n)
	return b.Set(statsKey(accountID), binary.AppendVarint(v, size), nil)
}

// OldestEmails implements store.Pruner: it walks the account's index of all
// emails forward from its oldest entry, after reading the account's count
// from its totals in the same view when keep is not 0.
func (s *Store) OldestEmails(ctx context.Context, accountID string, keep, skip int64, limit int) ([]*store.Email, error) {
	switch {
	case limit < 1 || limit > maxOldest:
		return nil, store.Errorf(store.Invalid, "oldest: limit %d is not from 1 to %d", limit, maxOldest)
	case keep < 0:
		return nil, store.Errorf(store.Invalid, "oldest: negative keep %d", keep)
	case skip < 0:
		return nil, store.Errorf(store.Invalid, "oldest: negative skip %d", skip)
	}
	if err := s.enter(ctx, "oldest emails"); err != nil {
		return nil, err
	}
	defer s.leave()
	snap := s.db.NewSnapshot()
	defer snap.Close()
	n := int64(limit)
	if keep > 0 {
		count, _, err := s.readStats(snap, accountID)
		if err != nil {
			return nil, wrap(err, "oldest emails")
		}
		n = min(n, count-keep-skip)
	}
	if n <= 0 {
		return nil, nil
	}
	prefix := indexPrefix(accountID, kindAll, "")
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, wrap(err, "oldest emails")
	}
	defer it.Close()
	out := make([]*store.Email, 0, n)
	key := emailKey(accountID, "")
	keyLen := len(key)
	skipped := int64(0)
	for valid := it.First(); valid; valid = it.Next() {
		if skipped < skip {
			skipped++
			if skipped%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return nil, wrap(err, "oldest emails")
				}
			}
			continue
		}
		k := it.Key()
		if len(k) < len(prefix)+timeLen {
			return nil, internalf("oldest: short index key %x", k)
		}
		key = append(key[:keyLen], k[len(prefix)+timeLen:]...)
		v, closer, err := snap.Get(key)
		if err != nil {
			if errors.Is(err, pebble.ErrNotFound) {
				return nil, internalf("oldest: index entry %x has no email", k)
			}
			return nil, wrap(err, "oldest emails")
		}
		r, err := decodeEmail(bytes.Clone(key), v)
		closer.Close()
		if err != nil {
			return nil, wrap(err, "oldest emails")
		}
		out = append(out, &r.Email)
		if int64(len(out)) == n {
			break
		}
	}
	if err := it.Error(); err != nil {
		return nil, wrap(err, "oldest emails")
	}
	return out, nil
}
