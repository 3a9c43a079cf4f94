package boltv4

import (
	"bytes"
	"context"

	bolt "go.etcd.io/bbolt"

	"github.com/mailsink/mailsink/store"
)

var _ store.Checks = (*Store)(nil)

// checkPrefix is the part of a check result's key before its name: the
// email's key and a zero byte, which no id holds.
func checkPrefix(accountID, id string) []byte { return append(emailKey(accountID, id), 0) }

func checkKey(accountID, id, name string) []byte { return append(checkPrefix(accountID, id), name...) }

// PutCheck implements store.Checks. The result is written only when its
// email is in bbolt, in the same transaction, so that a result never
// outlives its email.
func (s *Store) PutCheck(ctx context.Context, accountID, id, name string, result []byte) error {
	if len(result) > store.MaxCheckBytes {
		return store.Errorf(store.TooLarge, "check result of %d bytes is over the limit of %d", len(result), store.MaxCheckBytes)
	}
	if err := ctx.Err(); err != nil {
		return wrap(err, "put check")
	}
	key := emailKey(accountID, id)
	if err := s.wal.settleKey(ctx, key); err != nil {
		return wrap(err, "put check")
	}
	value := bytes.Clone(result)
	var found bool
	err := s.write(func(tx *bolt.Tx) error {
		found = tx.Bucket(bucketEmails).Get(key) != nil
		if !found {
			return nil // see UpdateEmail
		}
		return tx.Bucket(bucketChecks).Put(checkKey(accountID, id, name), value)
	})
	if err != nil {
		return wrap(err, "put check")
	}
	if !found {
		return store.ErrNotFound
	}
	return nil
}

// PutChecks implements store.Checks in one transaction, written like
// PutCheck's: each result only when its email is in bbolt.
func (s *Store) PutChecks(ctx context.Context, accountID, name string, results map[string][]byte) error {
	if err := store.CheckBatchError(results); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return wrap(err, "put checks")
	}
	if len(results) == 0 {
		return nil
	}
	values := make(map[string][]byte, len(results))
	for id, result := range results {
		if err := s.wal.settleKey(ctx, emailKey(accountID, id)); err != nil {
			return wrap(err, "put checks")
		}
		values[id] = bytes.Clone(result)
	}
	err := s.write(func(tx *bolt.Tx) error {
		emails, checks := tx.Bucket(bucketEmails), tx.Bucket(bucketChecks)
		for id, value := range values {
			if emails.Get(emailKey(accountID, id)) == nil {
				continue
			}
			if err := checks.Put(checkKey(accountID, id, name), value); err != nil {
				return err
			}
		}
		return nil
	})
	return wrap(err, "put checks")
}

// GetCheck implements store.Checks.
func (s *Store) GetCheck(ctx context.Context, accountID, id, name string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrap(err, "get check")
	}
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		out = bytes.Clone(tx.Bucket(bucketChecks).Get(checkKey(accountID, id, name)))
		return nil
	})
	if err != nil {
		return nil, wrap(err, "get check")
	}
	if out == nil {
		return nil, store.ErrNotFound
	}
	return out, nil
}

// GetChecks implements store.Checks.
func (s *Store) GetChecks(ctx context.Context, accountID string, ids []string, name string) (map[string][]byte, error) {
	if len(ids) > store.MaxCheckBatch {
		return nil, store.Errorf(store.Invalid, "%d ids in one read of check results, over the limit of %d", len(ids), store.MaxCheckBatch)
	}
	if err := ctx.Err(); err != nil {
		return nil, wrap(err, "get checks")
	}
	out := make(map[string][]byte, len(ids))
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketChecks)
		for _, id := range ids {
			if v := b.Get(checkKey(accountID, id, name)); v != nil {
				out[id] = bytes.Clone(v)
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap(err, "get checks")
	}
	return out, nil
}

// deleteChecks removes the check results of an email, in the transaction
// that deletes it.
func deleteChecks(tx *bolt.Tx, accountID, id string) error {
	prefix := checkPrefix(accountID, id)
	c := tx.Bucket(bucketChecks).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}
