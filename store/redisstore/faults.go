package redisstore

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/store"
)

var _ store.Faults = (*Store)(nil)

// An account's fault rules live in three hashes keyed by rule id: the rule
// as JSON (never changed once stored), the remaining matches of counted
// rules, and the expiry (Unix ms) of rules that expire. Keeping the
// changing and the compared parts apart lets the scripts work on plain
// numbers, without decoding JSON.
func (k accountKeys) faults() string      { return k.base + "f" }
func (k accountKeys) faultsLeft() string  { return k.base + "f:left" }
func (k accountKeys) faultsUntil() string { return k.base + "f:until" }

func (k accountKeys) faultKeys() []string {
	return []string{k.faults(), k.faultsLeft(), k.faultsUntil()}
}

// createFaultScript forgets the rules expired at ARGV[1] (Unix ms), then
// stores rule ARGV[2] as ARGV[3] with ARGV[4] remaining matches (0: not
// counted) and expiry ARGV[5] (0: never), unless ARGV[6] rules are left.
// It returns 1 when stored, 0 when the account is full.
var createFaultScript = redis.NewScript(`
local now = tonumber(ARGV[1])
local exp = redis.call('HGETALL', KEYS[3])
for i = 1, #exp, 2 do
  if tonumber(exp[i+1]) <= now then
    redis.call('HDEL', KEYS[1], exp[i])
    redis.call('HDEL', KEYS[2], exp[i])
    redis.call('HDEL', KEYS[3], exp[i])
  end
end
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[6]) then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
if ARGV[4] ~= '0' then redis.call('HSET', KEYS[2], ARGV[2], ARGV[4]) end
if ARGV[5] ~= '0' then redis.call('HSET', KEYS[3], ARGV[2], ARGV[5]) end
return 1
`)

// consumeFaultScript takes one remaining match of rule ARGV[1] and removes
// the rule with its last. It returns 1 when a match was taken, else 0.
var consumeFaultScript = redis.NewScript(`
local left = tonumber(redis.call('HGET', KEYS[2], ARGV[1]))
if not left or left <= 0 then
  return 0
end
if left == 1 then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HDEL', KEYS[3], ARGV[1])
else
  redis.call('HINCRBY', KEYS[2], ARGV[1], -1)
end
return 1
`)

// CreateFault implements store.Faults.
func (s *Store) CreateFault(ctx context.Context, r *store.FaultRule) error {
	v, err := json.Marshal(r)
	if err != nil {
		return store.Wrap(store.Internal, err, "store error")
	}
	var until int64
	if !r.ExpiresAt.IsZero() {
		until = r.ExpiresAt.UnixMilli()
	}
	k := s.account(r.AccountID)
	ok, err := createFaultScript.Run(ctx, s.client, k.faultKeys(),
		r.CreatedAt.UnixMilli(), r.ID, v, r.Remaining, until, store.MaxFaultRules).Int()
	if err != nil {
		return classify(err)
	}
	if ok == 0 {
		return store.Errorf(store.Conflict, "the account holds %d fault rules, the most it may: delete some first", store.MaxFaultRules)
	}
	return nil
}

// Faults implements store.Faults.
func (s *Store) Faults(ctx context.Context, accountID string) ([]*store.FaultRule, error) {
	k := s.account(accountID)
	// SMTP asks for every message, and most accounts have no rule: one
	// EXISTS answers that, where MULTI, two HGETALLs and EXEC cost Redis
	// four commands, and it shares a pipeline with other messages' calls
	// (shared.go). An account with rules costs one round trip more.
	exists := &existsCall{key: k.faults()}
	if err := s.sendInShared(ctx, accountID, exists); err != nil {
		return nil, classify(err)
	}
	if n, err := exists.cmd.Result(); err != nil {
		return nil, classify(err)
	} else if n == 0 {
		return []*store.FaultRule{}, nil
	}
	var rules, left *redis.MapStringStringCmd
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		rules = p.HGetAll(ctx, k.faults())
		left = p.HGetAll(ctx, k.faultsLeft())
		return nil
	})
	if err != nil {
		return nil, classify(err)
	}
	out := make([]*store.FaultRule, 0, len(rules.Val()))
	for id, v := range rules.Val() {
		r := &store.FaultRule{}
		if err := json.Unmarshal([]byte(v), r); err != nil {
			return nil, store.Wrap(store.Internal, err, "store error")
		}
		r.Remaining = 0
		if n, ok := left.Val()[id]; ok {
			r.Remaining, _ = strconv.ParseInt(n, 10, 64)
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *store.FaultRule) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// DeleteFault implements store.Faults.
func (s *Store) DeleteFault(ctx context.Context, accountID, id string) error {
	k := s.account(accountID)
	var n *redis.IntCmd
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		n = p.HDel(ctx, k.faults(), id)
		p.HDel(ctx, k.faultsLeft(), id)
		p.HDel(ctx, k.faultsUntil(), id)
		return nil
	})
	if err != nil {
		return classify(err)
	}
	if n.Val() == 0 {
		return store.ErrFaultNotFound
	}
	return nil
}

// DeleteFaults implements store.Faults.
func (s *Store) DeleteFaults(ctx context.Context, accountID string) error {
	return classify(s.client.Del(ctx, s.account(accountID).faultKeys()...).Err())
}

// ConsumeFault implements store.Faults.
func (s *Store) ConsumeFault(ctx context.Context, accountID, id string) (bool, error) {
	n, err := consumeFaultScript.Run(ctx, s.client, s.account(accountID).faultKeys(), id).Int()
	if err != nil {
		return false, classify(err)
	}
	return n == 1, nil
}
