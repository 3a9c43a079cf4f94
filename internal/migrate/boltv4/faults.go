package boltv4

import (
	"context"
	"encoding/json"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/mailsink/mailsink/store"
)

var _ store.Faults = (*Store)(nil)

// faultCache holds each account's rules as last read from the file. The SMTP
// server reads them in every transaction, and with nobody changing them a
// bbolt transaction and a decoding of each rule per message were 3% of the
// server's CPU. The file is locked by this process, so every change goes
// through the methods below, which forget the account's entry once their
// commit is over. gens counts each account's changes: a read stores what it
// read only if none of the account's ended while it read, so a read that
// began before a change never stores what the change replaced.
type faultCache struct {
	mu     sync.Mutex
	rules  map[string][]*store.FaultRule // by account id; nil: none
	gens   map[string]uint64             // by account id: changes so far
	closed bool                          // the store is closed: nothing is stored
}

// get returns a copy of the account's cached rules, or the generation a
// read from the file is to be stored under.
func (c *faultCache) get(accountID string) (rules []*store.FaultRule, gen uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cached, ok := c.rules[accountID]
	if !ok {
		return nil, c.gens[accountID], false
	}
	return cloneFaults(cached), 0, true
}

// put stores the rules read from the file under gen, unless one of the
// account's changes ended since.
func (c *faultCache) put(accountID string, gen uint64, rules []*store.FaultRule) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || gen != c.gens[accountID] {
		return
	}
	if c.rules == nil {
		c.rules = map[string][]*store.FaultRule{}
	}
	c.rules[accountID] = cloneFaults(rules)
}

// forget drops the account's entry after a change to its rules, whether
// the change committed or not (a commit can fail after it reached the disk).
func (c *faultCache) forget(accountID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gens == nil {
		c.gens = map[string]uint64{}
	}
	c.gens[accountID]++
	delete(c.rules, accountID)
}

// close empties the cache for good, so that reads after Close fail as the
// file's do, even one that read before Close and stores after.
func (c *faultCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.rules = nil
}

// cloneFaults copies rules, each rule and what a rule points to, so that
// neither a caller nor the cache sees the other's changes.
func cloneFaults(rules []*store.FaultRule) []*store.FaultRule {
	if len(rules) == 0 {
		return nil
	}
	out := make([]*store.FaultRule, len(rules))
	for i, r := range rules {
		c := *r
		if r.Reply != nil {
			reply := *r.Reply
			c.Reply = &reply
		}
		if r.Probability != nil {
			p := *r.Probability
			c.Probability = &p
		}
		out[i] = &c
	}
	return out
}

// CreateFault implements store.Faults.
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
	s.faults.forget(r.AccountID)
	if err != nil {
		return wrap(err, "create fault")
	}
	if full {
		return store.Errorf(store.Conflict, "the account holds %d fault rules, the most it may: delete some first", store.MaxFaultRules)
	}
	return nil
}

// Faults implements store.Faults.
func (s *Store) Faults(ctx context.Context, accountID string) ([]*store.FaultRule, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrap(err, "list faults")
	}
	rules, gen, ok := s.faults.get(accountID)
	if ok {
		return rules, nil
	}
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
	s.faults.put(accountID, gen, rules)
	return rules, nil
}

// DeleteFault implements store.Faults.
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
	s.faults.forget(accountID)
	if err != nil {
		return wrap(err, "delete fault")
	}
	if !found {
		return store.ErrFaultNotFound
	}
	return nil
}

// DeleteFaults implements store.Faults.
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
	s.faults.forget(accountID)
	return wrap(err, "delete faults")
}

// ConsumeFault implements store.Faults.
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
	s.faults.forget(accountID)
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
