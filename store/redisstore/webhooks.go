package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/store"
)

// Webhooks. With P{T}: an account's key base:
//
//	P{T}:wh          hash: webhook id -> webhook JSON
//	P{T}:whd:<id>    hash: "d" the delivery JSON, "lease" the token of the worker holding it
//	P{T}:whq         sorted set: pending delivery ids by due time (ms)
//	P{T}:whl:<wid>   sorted set: a webhook's delivery ids by creation time (ms), its log
//	P{T}:whcur       the id of the last event turned into deliveries
//	P webhook-accounts  set: the accounts that have had a webhook
//
// A claim moves a delivery's due time to the end of its lease, so that it
// is handed out again only if its holder never finishes it. All of an
// account's keys share its hash tag, so each script runs on one node of a
// cluster; the accounts set is written apart from them.

var _ store.Webhooks = (*Store)(nil)

func (k accountKeys) webhooks() string          { return k.base + "wh" }
func (k accountKeys) deliveryPrefix() string    { return k.base + "whd:" }
func (k accountKeys) deliveryQueue() string     { return k.base + "whq" }
func (k accountKeys) deliveryLogPrefix() string { return k.base + "whl:" }
func (k accountKeys) webhookCursor() string     { return k.base + "whcur" }

func (s *Store) webhookAccounts() string { return s.prefix + "webhook-accounts" }

var createWebhookScript = redis.NewScript(`
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
`)

// KEYS[1] webhooks, KEYS[2] the webhook's log, KEYS[3] the queue. ARGV[1]
// the id, ARGV[2] the delivery key prefix.
var deleteWebhookScript = redis.NewScript(`
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  redis.call('DEL', ARGV[2] .. id)
  redis.call('ZREM', KEYS[3], id)
end
redis.call('DEL', KEYS[2])
return 1
`)

var replaceWebhookScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
`)

// KEYS[1] the cursor, KEYS[2] the queue, KEYS[3] the webhooks (a delivery of
// a webhook deleted meanwhile is dropped, leaving no log behind). ARGV[1] the new cursor, ARGV[2]
// the delivery key prefix, ARGV[3] the log key prefix, ARGV[4] the log's
// bound, then per delivery: id, webhook id, JSON, due ms, created ms.
var enqueueScript = redis.NewScript(`
local function ahead(a, b)
  if not b or b == '' then return true end
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  if not am then return false end
  if not bm then return true end
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  return am > bm or (am == bm and as > bs)
end
if ARGV[1] ~= '' and ahead(ARGV[1], redis.call('GET', KEYS[1])) then
  redis.call('SET', KEYS[1], ARGV[1])
end
for i = 5, #ARGV, 5 do
  local id, wh, d, due, created = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local dk = ARGV[2] .. id
  if redis.call('EXISTS', dk) == 0 and redis.call('HEXISTS', KEYS[3], wh) == 1 then
    redis.call('HSET', dk, 'd', d)
    redis.call('ZADD', KEYS[2], due, id)
    local lk = ARGV[3] .. wh
    redis.call('ZADD', lk, created, id)
    -- The log keeps the newest ARGV[4]; older finished deliveries go, a
    -- pending one (still in the queue) stays until delivered or given up.
    local n = redis.call('ZCARD', lk) - tonumber(ARGV[4])
    if n > 0 then
      for _, old in ipairs(redis.call('ZRANGE', lk, 0, -1)) do
        if n <= 0 then break end
        if not redis.call('ZSCORE', KEYS[2], old) then
          redis.call('DEL', ARGV[2] .. old)
          redis.call('ZREM', lk, old)
          n = n - 1
        end
      end
    end
  end
end
return 1
`)

// KEYS[1] the queue. ARGV[1] now (ms), ARGV[2] the lease's end (ms),
// ARGV[3] the token, ARGV[4] the limit, ARGV[5] the delivery key prefix.
var claimScript = redis.NewScript(`
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[4]))
local out = {}
for _, id in ipairs(ids) do
  local dk = ARGV[5] .. id
  local d = redis.call('HGET', dk, 'd')
  if d then
    redis.call('HSET', dk, 'lease', ARGV[3])
    redis.call('ZADD', KEYS[1], ARGV[2], id)
    out[#out + 1] = d
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return out
`)

// KEYS[1] the delivery, KEYS[2] the queue. ARGV[1] the token, ARGV[2] the
// JSON, ARGV[3] "1" when still pending, ARGV[4] its due time, ARGV[5] its
// id. Answers -1 when the delivery is gone, 0 when the lease is lost.
var finishScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], 'd') == 0 then return -1 end
if redis.call('HGET', KEYS[1], 'lease') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'd', ARGV[2])
redis.call('HDEL', KEYS[1], 'lease')
if ARGV[3] == '1' then
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
else
  redis.call('ZREM', KEYS[2], ARGV[5])
end
return 1
`)

func webhookNotFound() error { return store.Errorf(store.NotFound, "webhook not found") }

// CreateWebhook implements store.Webhooks.
func (s *Store) CreateWebhook(ctx context.Context, w *store.Webhook, max int) error {
	v, err := json.Marshal(w)
	if err != nil {
		return store.Wrap(store.Internal, err, "encode webhook")
	}
	// The account is listed first, so that the worker never misses an
	// account that has a webhook.
	if err := s.client.SAdd(ctx, s.webhookAccounts(), w.AccountID).Err(); err != nil {
		return classify(err)
	}
	k := s.account(w.AccountID)
	ok, err := createWebhookScript.Run(ctx, s.client, []string{k.webhooks()}, w.ID, v, max).Int()
	if err != nil {
		return classify(err)
	}
	if ok == 0 {
		return store.Errorf(store.Conflict, "the account has %d webhooks already, the most it may have", max)
	}
	return nil
}

// GetWebhook implements store.Webhooks.
func (s *Store) GetWebhook(ctx context.Context, accountID, id string) (*store.Webhook, error) {
	v, err := s.client.HGet(ctx, s.account(accountID).webhooks(), id).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, webhookNotFound()
	}
	if err != nil {
		return nil, classify(err)
	}
	w := new(store.Webhook)
	if err := json.Unmarshal(v, w); err != nil {
		return nil, store.Wrap(store.Internal, err, "store error")
	}
	return w, nil
}

// ListWebhooks implements store.Webhooks.
func (s *Store) ListWebhooks(ctx context.Context, accountID string) ([]*store.Webhook, error) {
	m, err := s.client.HGetAll(ctx, s.account(accountID).webhooks()).Result()
	if err != nil {
		return nil, classify(err)
	}
	out := make([]*store.Webhook, 0, len(m))
	for _, v := range m {
		w := new(store.Webhook)
		if err := json.Unmarshal([]byte(v), w); err != nil {
			return nil, store.Wrap(store.Internal, err, "store error")
		}
		out = append(out, w)
	}
	// Ids are time-ordered UUIDs: by id is oldest first.
	slices.SortFunc(out, func(a, b *store.Webhook) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// DeleteWebhook implements store.Webhooks.
func (s *Store) DeleteWebhook(ctx context.Context, accountID, id string) error {
	k := s.account(accountID)
	ok, err := deleteWebhookScript.Run(ctx, s.client,
		[]string{k.webhooks(), k.deliveryLogPrefix() + id, k.deliveryQueue()}, id, k.deliveryPrefix()).Int()
	if err != nil {
		return classify(err)
	}
	if ok == 0 {
		return webhookNotFound()
	}
	return nil
}

// DisableWebhook implements store.Webhooks.
func (s *Store) DisableWebhook(ctx context.Context, accountID, id, reason string, at time.Time) error {
	w, err := s.GetWebhook(ctx, accountID, id)
	if err != nil {
		return err
	}
	if w.DisabledAt != nil {
		return nil
	}
	w.DisabledAt, w.DisabledReason = &at, reason
	v, err := json.Marshal(w)
	if err != nil {
		return store.Wrap(store.Internal, err, "encode webhook")
	}
	ok, err := replaceWebhookScript.Run(ctx, s.client, []string{s.account(accountID).webhooks()}, id, v).Int()
	if err != nil {
		return classify(err)
	}
	if ok == 0 {
		return webhookNotFound()
	}
	return nil
}

// WebhookAccounts implements store.Webhooks.
func (s *Store) WebhookAccounts(ctx context.Context) ([]string, error) {
	ids, err := s.client.SMembers(ctx, s.webhookAccounts()).Result()
	return ids, classify(err)
}

// WebhookCursor implements store.Webhooks.
func (s *Store) WebhookCursor(ctx context.Context, accountID string) (string, error) {
	cur, err := s.client.Get(ctx, s.account(accountID).webhookCursor()).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return cur, classify(err)
}

// EnqueueDeliveries implements store.Webhooks.
func (s *Store) EnqueueDeliveries(ctx context.Context, accountID, cursor string, ds []*store.Delivery) error {
	k := s.account(accountID)
	args := []any{cursor, k.deliveryPrefix(), k.deliveryLogPrefix(), store.MaxDeliveryLog}
	for _, d := range ds {
		v, err := json.Marshal(d)
		if err != nil {
			return store.Wrap(store.Internal, err, "encode delivery")
		}
		args = append(args, d.ID, d.WebhookID, v, d.NextAttemptAt.UnixMilli(), d.CreatedAt.UnixMilli())
	}
	err := enqueueScript.Run(ctx, s.client, []string{k.webhookCursor(), k.deliveryQueue(), k.webhooks()}, args...).Err()
	return classify(err)
}

// ClaimDeliveries implements store.Webhooks.
func (s *Store) ClaimDeliveries(ctx context.Context, accountID string, now time.Time, lease time.Duration, token string, limit int) ([]*store.Delivery, error) {
	k := s.account(accountID)
	vals, err := claimScript.Run(ctx, s.client, []string{k.deliveryQueue()},
		now.UnixMilli(), now.Add(lease).UnixMilli(), token, limit, k.deliveryPrefix()).StringSlice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, classify(err)
	}
	out := make([]*store.Delivery, 0, len(vals))
	for _, v := range vals {
		d := new(store.Delivery)
		if err := json.Unmarshal([]byte(v), d); err != nil {
			return nil, store.Wrap(store.Internal, err, "store error")
		}
		out = append(out, d)
	}
	return out, nil
}

// FinishDelivery implements store.Webhooks.
func (s *Store) FinishDelivery(ctx context.Context, d *store.Delivery, token string) error {
	v, err := json.Marshal(d)
	if err != nil {
		return store.Wrap(store.Internal, err, "encode delivery")
	}
	k := s.account(d.AccountID)
	pending := "0"
	if d.Status == store.DeliveryPending {
		pending = "1"
	}
	n, err := finishScript.Run(ctx, s.client, []string{k.deliveryPrefix() + d.ID, k.deliveryQueue()},
		token, v, pending, d.NextAttemptAt.UnixMilli(), d.ID).Int()
	if err != nil {
		return classify(err)
	}
	switch n {
	case -1:
		return store.Errorf(store.NotFound, "delivery not found")
	case 0:
		return store.Errorf(store.Conflict, "delivery lease lost")
	}
	return nil
}

// ListDeliveries implements store.Webhooks.
func (s *Store) ListDeliveries(ctx context.Context, accountID, webhookID string, limit int) ([]*store.Delivery, error) {
	k := s.account(accountID)
	ids, err := s.client.ZRevRange(ctx, k.deliveryLogPrefix()+webhookID, 0, int64(limit)-1).Result()
	if err != nil {
		return nil, classify(err)
	}
	out := []*store.Delivery{}
	if len(ids) == 0 {
		return out, nil
	}
	pipe := s.client.Pipeline()
	cmds := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGet(ctx, k.deliveryPrefix()+id, "d")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, classify(err)
	}
	for _, c := range cmds {
		v, err := c.Bytes()
		if err != nil {
			continue // trimmed meanwhile
		}
		d := new(store.Delivery)
		if err := json.Unmarshal(v, d); err != nil {
			return nil, store.Wrap(store.Internal, err, "store error")
		}
		out = append(out, d)
	}
	return out, nil
}
