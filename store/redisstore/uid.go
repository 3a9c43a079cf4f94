package redisstore

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/store"
)

// UIDs (store.Mailboxes). Each account has two more keys:
//
//	P{T}:uidn   hash  n: the last UID given; v: the UID validity, the
//	                  Unix second at which the numbering was first read
//	P{T}:uids   zset  the account's email ids scored by UID
//
// createScript gives each email it stores the next UID (HINCRBY n) in the
// same script, so UIDs follow the order in which creates commit, whichever
// replica runs them, and an email is never visible without its UID. The
// delete and fence scripts remove the email from uids; the counter is
// never removed, even when the account empties, so a UID is never given
// twice. Emails stored by a release before UIDs have none: uidScript sees
// that uids and the all index differ in size, and MailboxUIDs then walks
// them in bounded batches (reconcileScript), giving the missing emails UIDs
// in ReceivedAt order and dropping ids whose email is gone (deleted by such
// a release). While an older replica shares the Redis, its creates are
// numbered at the next look and its deletes cleaned at the next look that
// finds the sizes different.
func (k accountKeys) uidCounter() string { return k.base + "uidn" }

func (k accountKeys) uids() string { return k.base + "uids" }

// uidScript reads a window of an account's UIDs.
//
// KEYS[1] the UID counter, KEYS[2] the UID index, KEYS[3] the all index.
// ARGV[1] the exclusive lower UID bound, ARGV[2] the exclusive upper bound
// or "0" for none, ARGV[3] the limit, ARGV[4] "1" for the highest UIDs of
// the window, ARGV[5] "1" to skip the comparison of sizes.
//
// It returns {-1} when the UID index and the all index differ in size
// (MailboxUIDs reconciles them), else {validity, next UID, id1, uid1, ...}
// in ascending UID order. The validity is set on first use.
var uidScript = redis.NewScript(`
if ARGV[5] ~= '1' and redis.call('ZCARD', KEYS[2]) ~= redis.call('ZCARD', KEYS[3]) then
  return {-1}
end
local v = redis.call('HGET', KEYS[1], 'v')
if not v then
  v = redis.call('TIME')[1]
  redis.call('HSET', KEYS[1], 'v', v)
end
local nxt = tonumber(redis.call('HGET', KEYS[1], 'n') or '0') + 1
local lo, hi = '(' .. ARGV[1], '+inf'
if ARGV[2] ~= '0' then hi = '(' .. ARGV[2] end
local items
if ARGV[4] == '1' then
  items = redis.call('ZREVRANGEBYSCORE', KEYS[2], hi, lo, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[3]))
else
  items = redis.call('ZRANGEBYSCORE', KEYS[2], lo, hi, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[3]))
end
local res = {tonumber(v), nxt}
for i = 1, #items, 2 do
  res[#res + 1] = items[i]
  res[#res + 1] = items[i + 1]
end
return res
`)

// reconcileScript brings one batch of the UID index in line with the all
// index.
//
// KEYS as uidScript's. ARGV[1] "add" to walk the all index and number the
// emails missing from the UID index, "drop" to walk the UID index and
// remove ids missing from the all index; ARGV[2] the rank to start at,
// ARGV[3] the batch size.
//
// It returns the rank to go on from, or -1 when the walk is done.
var reconcileScript = redis.NewScript(`
local start, n = tonumber(ARGV[2]), tonumber(ARGV[3])
if ARGV[1] == 'add' then
  local ids = redis.call('ZRANGE', KEYS[3], start, start + n - 1)
  for _, id in ipairs(ids) do
    if not redis.call('ZSCORE', KEYS[2], id) then
      redis.call('ZADD', KEYS[2], redis.call('HINCRBY', KEYS[1], 'n', 1), id)
    end
  end
  if #ids < n then return -1 end
  return start + n
end
local ids = redis.call('ZRANGE', KEYS[2], start, start + n - 1)
local removed = 0
for _, id in ipairs(ids) do
  if not redis.call('ZSCORE', KEYS[3], id) then
    redis.call('ZREM', KEYS[2], id)
    removed = removed + 1
  end
end
if #ids < n then return -1 end
return start + n - removed
`)

// MailboxUIDs returns a window of the account's UIDs (store.Mailboxes). When
// the account has emails without a UID, or UIDs of emails gone, it first
// reconciles the UID index in batches of the scan batch, once per call.
// It returns Invalid when q.Limit is out of range and Unavailable when
// Redis cannot be reached.
func (s *Store) MailboxUIDs(ctx context.Context, q store.UIDQuery) (store.UIDPage, error) {
	if q.Limit < 1 || q.Limit > store.MaxUIDPage {
		return store.UIDPage{}, store.Errorf(store.Invalid, "limit must be between 1 and %d", store.MaxUIDPage)
	}
	k := s.account(q.AccountID)
	keys := []string{k.uidCounter(), k.uids(), k.all()}
	newest := "0"
	if q.Newest {
		newest = "1"
	}
	reconciled := "0"
	for {
		v, err := uidScript.Run(ctx, s.client, keys, q.After, q.Before, q.Limit, newest, reconciled).Slice()
		if err != nil {
			return store.UIDPage{}, classify(err)
		}
		if len(v) == 1 && reconciled == "0" {
			if err := s.reconcileUIDs(ctx, keys); err != nil {
				return store.UIDPage{}, err
			}
			reconciled = "1"
			continue
		}
		return decodeUIDPage(v, q.Newest)
	}
}

// reconcileUIDs numbers the emails without a UID, oldest first, then drops
// the UIDs of emails gone.
func (s *Store) reconcileUIDs(ctx context.Context, keys []string) error {
	for _, phase := range []string{"add", "drop"} {
		for start := int64(0); start >= 0; {
			next, err := reconcileScript.Run(ctx, s.client, keys, phase, start, s.batch).Int64()
			if err != nil {
				return classify(err)
			}
			start = next
		}
	}
	return nil
}

// decodeUIDPage decodes uidScript's answer, reversing a page of the newest
// into UID order.
func decodeUIDPage(v []any, newest bool) (store.UIDPage, error) {
	if len(v) < 2 || len(v)%2 != 0 {
		return store.UIDPage{}, store.Errorf(store.Internal, "uid script answered %d values", len(v))
	}
	validity, ok1 := v[0].(int64)
	next, ok2 := v[1].(int64)
	if !ok1 || !ok2 || validity <= 0 || validity > 1<<32-1 || next < 1 || next > 1<<32-1 {
		return store.UIDPage{}, store.Errorf(store.Internal, "uid script answered %v, %v", v[0], v[1])
	}
	p := store.UIDPage{UIDValidity: uint32(validity), UIDNext: uint32(next), Emails: make([]store.EmailUID, 0, (len(v)-2)/2)}
	for i := 2; i < len(v); i += 2 {
		id, ok1 := v[i].(string)
		score, ok2 := v[i+1].(string)
		uid, err := strconv.ParseUint(score, 10, 32)
		if !ok1 || !ok2 || err != nil || uid == 0 {
			return store.UIDPage{}, store.Errorf(store.Internal, "uid script answered %v, %v", v[i], v[i+1])
		}
		p.Emails = append(p.Emails, store.EmailUID{UID: uint32(uid), ID: id})
	}
	if newest {
		for i, j := 0, len(p.Emails)-1; i < j; i, j = i+1, j-1 {
			p.Emails[i], p.Emails[j] = p.Emails[j], p.Emails[i]
		}
	}
	return p, nil
}
