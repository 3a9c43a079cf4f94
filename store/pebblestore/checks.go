package pebblestore

import (
	"bytes"
	"context"
	"errors"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mailsink/mailsink/store"
)

var _ store.Checks = (*Store)(nil)

// checkPrefix is the part of a check result's key before its name: the
// email's id and a zero byte, which no id holds.
func checkPrefix(accountID, id string) []byte {
	k := append(accountKey(accountID, partCheck, len(id)+1+16), id...)
	return append(k, 0)
}

func checkKey(accountID, id, name string) []byte { return append(checkPrefix(accountID, id), name...) }

// PutCheck implements store.Checks. The result is written only while its
// email exists, under the lock that deletes take, so that a result never
// outlives its email.
func (s *Store) PutCheck(ctx context.Context, accountID, id, name string, result []byte) error {
	if len(result) > store.MaxCheckBytes {
		return store.Errorf(store.TooLarge, "check result of %d bytes is over the limit of %d", len(result), store.MaxCheckBytes)
	}
	if err := s.enter(ctx, "put check"); err != nil {
		return err
	}
	defer s.leave()
	err := s.changeDerived(func(b *pebble.Batch) error {
		found, err := s.has(emailKey(accountID, id))
		if err != nil {
			return err
		}
		if !found {
			return store.ErrNotFound
		}
		return b.Set(checkKey(accountID, id, name), result, nil)
	})
	return wrap(err, "put check")
}

// PutChecks implements store.Checks in one batch, written like PutCheck's:
// each result only while its email exists, under the lock that deletes
// take.
func (s *Store) PutChecks(ctx context.Context, accountID, name string, results map[string][]byte) error {
	if err := store.CheckBatchError(results); err != nil {
		return err
	}
	if len(results) == 0 {
		return nil
	}
	if err := s.enter(ctx, "put checks"); err != nil {
		return err
	}
	defer s.leave()
	err := s.changeDerived(func(b *pebble.Batch) error {
		for id, result := range results {
			found, err := s.has(emailKey(accountID, id))
			if err != nil {
				return err
			}
			if !found {
				continue
			}
			if err := b.Set(checkKey(accountID, id, name), result, nil); err != nil {
				return err
			}
		}
		return nil
	})
	return wrap(err, "put checks")
}

// GetCheck implements store.Checks.
func (s *Store) GetCheck(ctx context.Context, accountID, id, name string) ([]byte, error) {
	if err := s.enter(ctx, "get check"); err != nil {
		return nil, err
	}
	defer s.leave()
	v, err := s.get(checkKey(accountID, id, name))
	if err != nil {
		return nil, wrap(err, "get check")
	}
	if v == nil {
		return nil, store.ErrNotFound
	}
	return v, nil
}

// GetChecks implements store.Checks, from one view of the store.
func (s *Store) GetChecks(ctx context.Context, accountID string, ids []string, name string) (map[string][]byte, error) {
	if len(ids) > store.MaxCheckBatch {
		return nil, store.Errorf(store.Invalid, "%d ids in one read of check results, over the limit of %d", len(ids), store.MaxCheckBatch)
	}
	if err := s.enter(ctx, "get checks"); err != nil {
		return nil, err
	}
	defer s.leave()
	snap := s.db.NewSnapshot()
	defer snap.Close()
	out := make(map[string][]byte, len(ids))
	for _, id := range ids {
		v, closer, err := snap.Get(checkKey(accountID, id, name))
		if errors.Is(err, pebble.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, wrap(err, "get checks")
		}
		out[id] = bytes.Clone(v)
		closer.Close()
	}
	return out, nil
}

// deleteChecks removes the check results of an email in the batch that
// deletes it. Called by change's fill.
func (s *Store) deleteChecks(b *pebble.Batch, accountID, id string) error {
	keys, err := keysUnder(s.db, checkPrefix(accountID, id), 0)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := b.Delete(k, nil); err != nil {
			return err
		}
	}
	return nil
}
