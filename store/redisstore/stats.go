package redisstore

import (
	"context"
	"strconv"

	"github.com/mailsink/mailsink/store"
)

// AccountStats implements store.Stats: the count is the cardinality of the
// account's "all" index and the bytes come from its stats hash, which the
// create and delete scripts update atomically with the emails (see the
// package comment for emails stored before the hash existed). It returns
// Unavailable when Redis cannot be reached.
func (s *Store) AccountStats(ctx context.Context, accountID string) (emails, rawBytes int64, err error) {
	k := s.account(accountID)
	v, err := statsScript.Run(ctx, s.client, []string{k.all(), k.stats()}).Slice()
	if err != nil {
		return 0, 0, classify(err)
	}
	if len(v) != 2 {
		return 0, 0, store.Errorf(store.Internal, "stats script answered %d values", len(v))
	}
	n, ok1 := v[0].(int64)
	b, ok2 := v[1].(string)
	if !ok1 || !ok2 {
		return 0, 0, store.Errorf(store.Internal, "stats script answered %T, %T", v[0], v[1])
	}
	rawBytes, err = strconv.ParseInt(b, 10, 64)
	if err != nil {
		return 0, 0, store.Wrap(store.Internal, err, "decode stats")
	}
	return n, rawBytes, nil
}

// OldestEmails implements store.Pruner with one script that reads the
// account's count and the first ranks of its "all" index together, at a cost
// of O(log N + limit). It returns Invalid when limit is not in 1..100 or keep
// is negative, and Unavailable when Redis cannot be reached.
func (s *Store) OldestEmails(ctx context.Context, accountID string, keep, skip int64, limit int) ([]*store.Email, error) {
	switch {
	case limit < 1 || limit > maxLimit:
		return nil, store.Errorf(store.Invalid, "limit must be between 1 and %d", maxLimit)
	case keep < 0:
		return nil, store.Errorf(store.Invalid, "keep must not be negative")
	case skip < 0:
		return nil, store.Errorf(store.Invalid, "skip must not be negative")
	}
	k := s.account(accountID)
	v, err := oldestScript.Run(ctx, s.client, []string{k.all()}, k.emailPrefix(), formatInt(keep), limit, formatInt(skip),
		k.records()).Slice()
	if err != nil {
		return nil, classify(err)
	}
	return decodeItems(v, "oldest", accountID)
}
