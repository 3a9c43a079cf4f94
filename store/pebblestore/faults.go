package pebblestore

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mailsink/mailsink/store"
)

var _ store.Faults = (*Store)(nil)

// faultCache holds each account's rules as last read from the store. The SMTP
// server reads them in every transaction, and with nobody changing them a
// read and a decoding of each rule per message were 3% of the
// server's CPU. The store is locked by this process, so every change goes
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
// read from the store is to be stored under.
func (c *faultCache) get(accountID string) (rules []*store.FaultRule, gen uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cached, ok := c.rules[accountID]
	if !ok {
		return nil, c.gens[accountID], false
	}
	return cloneFaults(cached), 0, true
}

// put stores the rules read from the store under gen, unless one of the
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
// store's do, even one that read before Close and stores after.
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

func faultKey(accountID, id string) []byte {
	return append(accountKey(accountID, partFault, len(id)), id...)
}

// CreateFault implements store.Faults.
func (s *Store) CreateFault(ctx context.Context, r *store.FaultRule) error {
	if err := s.enter(ctx, "create fault"); err != nil {
		return err
	}
	defer s.leave()
	v, err := json.Marshal(r)
	if err != nil {
		return wrap(err, "create fault")
	}
	full := false
	_, err = s.change(func(b *pebble.Batch) (int, error) {
		rules, err := s.readFaults(s.db, r.AccountID)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, old := range rules {
			if !old.Expired(r.CreatedAt) {
				n++
				continue
			}
			if err := b.Delete(faultKey(r.AccountID, old.ID), nil); err != nil {
				return 0, err
			}
		}
		if n >= store.MaxFaultRules {
			full = true
			return 0, nil
		}
		return 0, b.Set(faultKey(r.AccountID, r.ID), v, nil)
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
	if err := s.enter(ctx, "list faults"); err != nil {
		return nil, err
	}
	defer s.leave()
	rules, gen, ok := s.faults.get(accountID)
	if ok {
		return rules, nil
	}
	rules, err := s.readFaults(s.db, accountID)
	if err != nil {
		return nil, wrap(err, "list faults")
	}
	s.faults.put(accountID, gen, rules)
	return rules, nil
}

// readFaults returns the account's rules in key order.
func (s *Store) readFaults(r pebble.Reader, accountID string) ([]*store.FaultRule, error) {
	prefix := accountKey(accountID, partFault, 0)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var rules []*store.FaultRule
	for valid := it.First(); valid; valid = it.Next() {
		rule := &store.FaultRule{}
		if err := json.Unmarshal(it.Value(), rule); err != nil {
			return nil, errCorrupt
		}
		rules = append(rules, rule)
	}
	return rules, it.Error()
}

// DeleteFault implements store.Faults.
func (s *Store) DeleteFault(ctx context.Context, accountID, id string) error {
	if err := s.enter(ctx, "delete fault"); err != nil {
		return err
	}
	defer s.leave()
	found := false
	_, err := s.change(func(b *pebble.Batch) (int, error) {
		var err error
		if found, err = s.has(faultKey(accountID, id)); err != nil || !found {
			return 0, err
		}
		return 0, b.Delete(faultKey(accountID, id), nil)
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
	if err := s.enter(ctx, "delete faults"); err != nil {
		return err
	}
	defer s.leave()
	_, err := s.change(func(b *pebble.Batch) (int, error) {
		rules, err := s.readFaults(s.db, accountID)
		if err != nil {
			return 0, err
		}
		for _, r := range rules {
			if err := b.Delete(faultKey(accountID, r.ID), nil); err != nil {
				return 0, err
			}
		}
		return 0, nil
	})
	s.faults.forget(accountID)
	return wrap(err, "delete faults")
}

// ConsumeFault implements store.Faults.
func (s *Store) ConsumeFault(ctx context.Context, accountID, id string) (bool, error) {
	if err := s.enter(ctx, "consume fault"); err != nil {
		return false, err
	}
	defer s.leave()
	taken := false
	_, err := s.change(func(b *pebble.Batch) (int, error) {
		v, err := s.get(faultKey(accountID, id))
		if err != nil || v == nil {
			return 0, err
		}
		var r store.FaultRule
		if err := json.Unmarshal(v, &r); err != nil {
			return 0, errCorrupt
		}
		if r.Count == 0 || r.Remaining <= 0 {
			return 0, nil
		}
		taken = true
		if r.Remaining--; r.Remaining == 0 {
			return 0, b.Delete(faultKey(accountID, id), nil)
		}
		nv, err := json.Marshal(&r)
		if err != nil {
			return 0, err
		}
		return 0, b.Set(faultKey(accountID, id), nv, nil)
	})
	s.faults.forget(accountID)
	if err != nil {
		return false, wrap(err, "consume fault")
	}
	return taken, nil
}
