package redisstore

import (
	"context"
	"encoding/json"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/store"
)

var _ store.Idempotency = (*Store)(nil)

// idem is the key of an idempotency key's reservation.
func (k accountKeys) idem(key string) string { return k.hashed("idem:", key) }

// reserveScript sets KEYS[1] to ARGV[1] for ARGV[2] milliseconds unless it
// is set; it returns false when it set it, else the value already there.
var reserveScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return false
end
return redis.call('GET', KEYS[1])
`)

type reservationJSON struct {
	Digest string   `json:"d"`
	IDs    []string `json:"ids"`
	Stored bool     `json:"s,omitempty"`
}

// settleScript marks the reservation at KEYS[1] stored, keeping its time to
// live; a key that is gone is left alone.
var settleScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local r = cjson.decode(v)
r['s'] = true
redis.call('SET', KEYS[1], cjson.encode(r), 'KEEPTTL')
return 1
`)

// releaseScript deletes the reservation at KEYS[1] unless it is stored.
var releaseScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
if cjson.decode(v)['s'] then return 0 end
redis.call('DEL', KEYS[1])
return 1
`)

// Release implements store.Idempotency.
func (s *Store) Release(ctx context.Context, accountID, key string) error {
	return classify(releaseScript.Run(ctx, s.client, []string{s.account(accountID).idem(key)}).Err())
}

// Settle implements store.Idempotency.
func (s *Store) Settle(ctx context.Context, accountID, key string) error {
	return classify(settleScript.Run(ctx, s.client, []string{s.account(accountID).idem(key)}).Err())
}

// Reserve implements store.Idempotency.
func (s *Store) Reserve(ctx context.Context, accountID, key string, r store.Reservation, ttl time.Duration) (store.Reservation, bool, error) {
	v, err := json.Marshal(reservationJSON{Digest: r.Digest, IDs: r.IDs})
	if err != nil {
		return store.Reservation{}, false, store.Wrap(store.Internal, err, "encode reservation")
	}
	old, err := reserveScript.Run(ctx, s.client, []string{s.account(accountID).idem(key)}, v, ttl.Milliseconds()).Text()
	switch {
	case err == redis.Nil:
		return r, true, nil
	case err != nil:
		return store.Reservation{}, false, classify(err)
	}
	var got reservationJSON
	if err := json.Unmarshal([]byte(old), &got); err != nil {
		return store.Reservation{}, false, store.Wrap(store.Internal, err, "decode reservation")
	}
	return store.Reservation{Digest: got.Digest, IDs: got.IDs, Stored: got.Stored}, false, nil
}
