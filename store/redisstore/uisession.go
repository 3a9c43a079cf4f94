package redisstore

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/store"
)

var _ store.Sessions = (*Store)(nil)

// uiSession is the key of a dashboard session; its id is hashed, so that
// key names never hold a live session id.
func (k accountKeys) uiSession(id string) string { return k.hashed("ui:", id) }

// uiSessions is the sorted set of the account's session keys, by expiry in
// Unix milliseconds.
func (k accountKeys) uiSessions() string { return k.base + "uis" }

type uiSessionJSON struct {
	AccountID string `json:"a"`
	KeyDigest string `json:"k"`
}

// createUISessionScript sets the session KEYS[1] to ARGV[1] for ARGV[2]
// milliseconds and lists it in KEYS[2], whose expired entries it drops and
// whose entries past ARGV[3], closest to expiry first, it unlists and
// returns (the caller deletes them: a script touches only the keys it is
// given). The list lives as long as its longest session. Expiry is by
// Redis's clock, so replicas' clocks do not matter.
var createUISessionScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], now + ttl, KEYS[1])
local ended = {}
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[3])
if over > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[2], over)
  for i = 1, #popped, 2 do
    ended[#ended + 1] = popped[i]
  end
end
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
if last[2] then
  redis.call('PEXPIREAT', KEYS[2], last[2])
end
return ended
`)

// getUISessionScript returns the session KEYS[1] while KEYS[2] lists it: a
// session past the limit ends when it is unlisted, before its key is gone.
var getUISessionScript = redis.NewScript(`
if redis.call('ZSCORE', KEYS[2], KEYS[1]) then
  return redis.call('GET', KEYS[1])
end
return false
`)

// deleteUISessionScript ends the session KEYS[1] and unlists it from KEYS[2].
var deleteUISessionScript = redis.NewScript(`
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], KEYS[1])
return 1
`)

// CreateUISession implements store.Sessions.
func (s *Store) CreateUISession(ctx context.Context, id string, sess store.UISession, ttl time.Duration, limit int) error {
	v, err := json.Marshal(uiSessionJSON{AccountID: sess.AccountID, KeyDigest: hex.EncodeToString(sess.KeyDigest[:])})
	if err != nil {
		return store.Wrap(store.Internal, err, "encode dashboard session")
	}
	k := s.account(sess.AccountID)
	keys := []string{k.uiSession(id), k.uiSessions()}
	ended, err := createUISessionScript.Run(ctx, s.client, keys, v, max(ttl.Milliseconds(), 1), max(limit, 1)).StringSlice()
	if err != nil {
		return classify(err)
	}
	// Unlisted, they are ended already; deleting their keys frees the
	// memory before they expire, and a failure leaves them to expire.
	for _, key := range ended {
		s.client.Del(ctx, key)
	}
	return nil
}

// UISession implements store.Sessions.
func (s *Store) UISession(ctx context.Context, accountID, id string) (store.UISession, bool, error) {
	k := s.account(accountID)
	v, err := getUISessionScript.Run(ctx, s.client, []string{k.uiSession(id), k.uiSessions()}).Text()
	switch {
	case err == redis.Nil:
		return store.UISession{}, false, nil
	case err != nil:
		return store.UISession{}, false, classify(err)
	}
	var got uiSessionJSON
	digest, derr := []byte(nil), json.Unmarshal([]byte(v), &got)
	if derr == nil {
		digest, derr = hex.DecodeString(got.KeyDigest)
	}
	if derr != nil || len(digest) != 32 || got.AccountID != accountID {
		return store.UISession{}, false, nil // not a session this code wrote: none
	}
	out := store.UISession{AccountID: got.AccountID}
	copy(out.KeyDigest[:], digest)
	return out, true, nil
}

// DeleteUISession implements store.Sessions.
func (s *Store) DeleteUISession(ctx context.Context, accountID, id string) error {
	k := s.account(accountID)
	return classify(deleteUISessionScript.Run(ctx, s.client, []string{k.uiSession(id), k.uiSessions()}).Err())
}
