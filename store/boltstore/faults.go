package boltstore

import (
	"context"
	"encoding/json"

	bolt "go.etcd.io/bbolt"

	"github.com/mailsink/mailsink/store"
)

var _ store.FaultStore = (*Store)(nil)

// CreateFault implements store.FaultStore.
func (s *Store) CreateFault(ctx context.Context, r *store.FaultRule) error {
	if err := ctx.Err(); err != nil {
		return wrap(err, "create fault")
	}
	v, err := json.Marshal(r)
	if err != nil {
		return wrap(err, "create fault")
	}
	full := false
	err = s.write(func(tx *bolt.Tx) error {
		full = false
		b, err := tx.Bucket(bucketFaults).CreateBucketIfNotExists([]byte(r.AccountID))
		if err != nil {
			return err
		}
		rules, err := decodeFaults(b)
		if err != nil {
			return err
		}
		n := 0
		for _, old := range rules {
			if !old.Expired(r.CreatedAt) {
				n++
				continue
			}
			if err := b.Delete([]byte(old.ID)); err != nil {
				return err
			}
		}
		if n >= store.MaxFaultRules {
			full = true
			return nil
		}
		return b.Put([]byte(r.ID), v)
	})
	if err != nil {
		return wrap(err, "create fault")
	}
	if full {
		return store.Errorf(store.Conflict, "the account holds %d fault rules, the most it may: delete some first", store.MaxFaultRules)
	}
	return nil
}

// Faults implements store.FaultStore.
func (s *Store) Faults(ctx context.Context, accountID string) ([]*store.FaultRule, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrap(err, "list faults")
	}
	var rules []*store.FaultRule
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketFaults).Bucket([]byte(accountID))
		if b == nil {
			return nil
		}
		var err error
		rules, err = decodeFaults(b)
		return err
	})
	if err != nil {
		return nil, wrap(err, "list faults")
	}
	return rules, nil
}

// DeleteFault implements store.FaultStore.
func (s *Store) DeleteFault(ctx context.Context, accountID, id string) error {
	if err := ctx.Err(); err != nil {
		return wrap(err, "delete fault")
	}
	found := false
	err := s.write(func(tx *bolt.Tx) error {
		found = false
		b := tx.Bucket(bucketFaults).Bucket([]byte(accountID))
		if b == nil || b.Get([]byte(id)) == nil {
			return nil
		}
		found = true
		return b.Delete([]byte(id))
	})
	if err != nil {
		return wrap(err, "delete fault")
	}
	if !found {
		return store.ErrFaultNotFound
	}
	return nil
}

// DeleteFaults implements store.FaultStore.
func (s *Store) DeleteFaults(ctx context.Context, accountID string) error {
	if err := ctx.Err(); err != nil {
		return wrap(err, "delete faults")
	}
	err := s.write(func(tx *bolt.Tx) error {
		err := tx.Bucket(bucketFaults).DeleteBucket([]byte(accountID))
		if err == bolt.ErrBucketNotFound {
			return nil
		}
		return err
	})
	return wrap(err, "delete faults")
}

// ConsumeFault implements store.FaultStore.
func (s *Store) ConsumeFault(ctx context.Context, accountID, id string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, wrap(err, "consume fault")
	}
	taken := false
	err := s.write(func(tx *bolt.Tx) error {
		taken = false
		b := tx.Bucket(bucketFaults).Bucket([]byte(accountID))
		if b == nil {
			return nil
		}
		v := b.Get([]byte(id))
		if v == nil {
			return nil
		}
		var r store.FaultRule
		if err := json.Unmarshal(v, &r); err != nil {
			return errCorrupt
		}
		if r.Count == 0 || r.Remaining <= 0 {
			return nil
		}
		taken = true
		if r.Remaining--; r.Remaining == 0 {
			return b.Delete([]byte(id))
		}
		v, err := json.Marshal(&r)
		if err != nil {
			return err
		}
		return b.Put([]byte(id), v)
	})
	if err != nil {
		return false, wrap(err, "consume fault")
	}
	return taken, nil
}

// decodeFaults returns the rules of an account's bucket in key order.
func decodeFaults(b *bolt.Bucket) ([]*store.FaultRule, error) {
	var rules []*store.FaultRule
	err := b.ForEach(func(_, v []byte) error {
		r := &store.FaultRule{}
		if err := json.Unmarshal(v, r); err != nil {
			return errCorrupt
		}
		rules = append(rules, r)
		return nil
	})
	return rules, err
}
