package boltv4

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mailsink/mailsink/internal/eventhub"
	"github.com/mailsink/mailsink/store"
)

// Webhooks live in the bucket "webhooks", created with the first one, with
// one nested bucket per account:
//
//	webhooks/<account>/subs    webhook id                 -> webhook JSON
//	webhooks/<account>/del     delivery id                -> deliveryRecord JSON
//	webhooks/<account>/queue   due (8 bytes, ms) | id     -> empty: pending deliveries by due time
//	webhooks/<account>/log/<webhook id>  created (8) | id -> empty: the webhook's deliveries by age
//	webhooks/<account>         "cursor"                   -> the last event turned into deliveries
//
// A claimed delivery's queue key moves to the end of its lease, so that it
// is handed out again only if its holder never finishes it.
var (
	bucketWebhooks = []byte("webhooks")
	whSubs         = []byte("subs")
	whDeliveries   = []byte("del")
	whQueue        = []byte("queue")
	whLog          = []byte("log")
	whCursor       = []byte("cursor")
)

var _ store.Webhooks = (*Store)(nil)

// deliveryRecord is a delivery as stored, with its lease and queue place.
type deliveryRecord struct {
	store.Delivery
	Lease string `json:"lease,omitempty"`
	Due   int64  `json:"due"` // the queue key's time, ms; 0 when not queued
}

func msKey(ms int64, id string) []byte {
	k := binary.BigEndian.AppendUint64(nil, uint64(ms))
	return append(k, id...)
}

// accountWebhooks returns the account's bucket, nil when it has none; with
// create it makes the buckets it lacks (in a read-write tx).
func accountWebhooks(tx *bolt.Tx, accountID string, create bool) (*bolt.Bucket, error) {
	if !create {
		top := tx.Bucket(bucketWebhooks)
		if top == nil {
			return nil, nil
		}
		return top.Bucket([]byte(accountID)), nil
	}
	top, err := tx.CreateBucketIfNotExists(bucketWebhooks)
	if err != nil {
		return nil, err
	}
	b, err := top.CreateBucketIfNotExists([]byte(accountID))
	if err != nil {
		return nil, err
	}
	for _, name := range [][]byte{whSubs, whDeliveries, whQueue, whLog} {
		if _, err := b.CreateBucketIfNotExists(name); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// countKeys counts a bucket's keys with a cursor: Bucket.Stats does not
// see what the transaction has written.
func countKeys(b *bolt.Bucket) int {
	n := 0
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	return n
}

func webhookNotFound() error { return store.Errorf(store.NotFound, "webhook not found") }

// CreateWebhook implements store.Webhooks.
func (s *Store) CreateWebhook(ctx context.Context, w *store.Webhook, max int) error {
	if err := ctx.Err(); err != nil {
		return wrap(err, "create webhook")
	}
	v, err := json.Marshal(w)
	if err != nil {
		return store.Wrap(store.Internal, err, "encode webhook")
	}
	return wrap(s.write(func(tx *bolt.Tx) error {
		b, err := accountWebhooks(tx, w.AccountID, true)
		if err != nil {
			return err
		}
		subs := b.Bucket(whSubs)
		if countKeys(subs) >= max {
			return store.Errorf(store.Conflict, "the account has %d webhooks already, the most it may have", max)
		}
		return subs.Put([]byte(w.ID), v)
	}), "create webhook")
}

// GetWebhook implements store.Webhooks.
func (s *Store) GetWebhook(ctx context.Context, accountID, id string) (*store.Webhook, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrap(err, "get webhook")
	}
	var w *store.Webhook
	err := s.db.View(func(tx *bolt.Tx) error {
		b, _ := accountWebhooks(tx, accountID, false)
		if b == nil {
			return webhookNotFound()
		}
		v := b.Bucket(whSubs).Get([]byte(id))
		if v == nil {
			return webhookNotFound()
		}
		w = new(store.Webhook)
		return json.Unmarshal(v, w)
	})
	return w, wrap(err, "get webhook")
}

// ListWebhooks implements store.Webhooks.
func (s *Store) ListWebhooks(ctx context.Context, accountID string) ([]*store.Webhook, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrap(err, "list webhooks")
	}
	out := []*store.Webhook{}
	err := s.db.View(func(tx *bolt.Tx) error {
		b, _ := accountWebhooks(tx, accountID, false)
		if b == nil {
			return nil
		}
		return b.Bucket(whSubs).ForEach(func(_, v []byte) error {
			w := new(store.Webhook)
			if err := json.Unmarshal(v, w); err != nil {
				return err
			}
			out = append(out, w)
			return nil
		})
	})
	if err != nil {
		return nil, wrap(err, "list webhooks")
	}
	return out, nil // in key order: ids are time-ordered, so oldest first
}

// DeleteWebhook implements store.Webhooks.
func (s *Store) DeleteWebhook(ctx context.Context, accountID, id string) error {
	if err := ctx.Err(); err != nil {
		return wrap(err, "delete webhook")
	}
	return wrap(s.write(func(tx *bolt.Tx) error {
		b, _ := accountWebhooks(tx, accountID, false)
		if b == nil || b.Bucket(whSubs).Get([]byte(id)) == nil {
			return webhookNotFound()
		}
		if err := b.Bucket(whSubs).Delete([]byte(id)); err != nil {
			return err
		}
		logs := b.Bucket(whLog)
		lb := logs.Bucket([]byte(id))
		if lb == nil {
			return nil
		}
		c := lb.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if err := dropDelivery(b, string(k[8:])); err != nil {
				return err
			}
		}
		return logs.DeleteBucket([]byte(id))
	}), "delete webhook")
}

// dropDelivery removes a delivery and its queue entry (not its log entry).
// pendingDelivery reports whether delivery id is still queued.
func pendingDelivery(b *bolt.Bucket, id string) bool {
	v := b.Bucket(whDeliveries).Get([]byte(id))
	var r deliveryRecord
	return v != nil && json.Unmarshal(v, &r) == nil && r.Due != 0
}

func dropDelivery(b *bolt.Bucket, id string) error {
	dels := b.Bucket(whDeliveries)
	v := dels.Get([]byte(id))
	if v == nil {
		return nil
	}
	var r deliveryRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return err
	}
	if r.Due != 0 {
		if err := b.Bucket(whQueue).Delete(msKey(r.Due, id)); err != nil {
			return err
		}
	}
	return dels.Delete([]byte(id))
}

// DisableWebhook implements store.Webhooks.
func (s *Store) DisableWebhook(ctx context.Context, accountID, id, reason string, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return wrap(err, "disable webhook")
	}
	return wrap(s.write(func(tx *bolt.Tx) error {
		b, _ := accountWebhooks(tx, accountID, false)
		if b == nil {
			return webhookNotFound()
		}
		v := b.Bucket(whSubs).Get([]byte(id))
		if v == nil {
			return webhookNotFound()
		}
		var w store.Webhook
		if err := json.Unmarshal(v, &w); err != nil {
			return err
		}
		if w.DisabledAt != nil {
			return nil
		}
		w.DisabledAt, w.DisabledReason = &at, reason
		nv, err := json.Marshal(&w)
		if err != nil {
			return err
		}
		return b.Bucket(whSubs).Put([]byte(id), nv)
	}), "disable webhook")
}

// WebhookAccounts implements store.Webhooks.
func (s *Store) WebhookAccounts(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrap(err, "webhook accounts")
	}
	var out []string
	err := s.db.View(func(tx *bolt.Tx) error {
		top := tx.Bucket(bucketWebhooks)
		if top == nil {
			return nil
		}
		return top.ForEachBucket(func(k []byte) error {
			out = append(out, string(k))
			return nil
		})
	})
	return out, wrap(err, "webhook accounts")
}

// WebhookCursor implements store.Webhooks.
func (s *Store) WebhookCursor(ctx context.Context, accountID string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", wrap(err, "webhook cursor")
	}
	var cur string
	err := s.db.View(func(tx *bolt.Tx) error {
		if b, _ := accountWebhooks(tx, accountID, false); b != nil {
			cur = string(b.Get(whCursor))
		}
		return nil
	})
	return cur, wrap(err, "webhook cursor")
}

// EnqueueDeliveries implements store.Webhooks.
func (s *Store) EnqueueDeliveries(ctx context.Context, accountID, cursor string, ds []*store.Delivery) error {
	if err := ctx.Err(); err != nil {
		return wrap(err, "enqueue deliveries")
	}
	return wrap(s.write(func(tx *bolt.Tx) error {
		b, err := accountWebhooks(tx, accountID, true)
		if err != nil {
			return err
		}
		if cursor != "" && cursorAhead(cursor, string(b.Get(whCursor))) {
			if err := b.Put(whCursor, []byte(cursor)); err != nil {
				return err
			}
		}
		dels, queue, logs := b.Bucket(whDeliveries), b.Bucket(whQueue), b.Bucket(whLog)
		logLen := map[string]int{} // by webhook, counted once per call
		for _, d := range ds {
			// A delivery already queued is not queued twice, and one of a
			// webhook deleted meanwhile leaves no log behind.
			if dels.Get([]byte(d.ID)) != nil || b.Bucket(whSubs).Get([]byte(d.WebhookID)) == nil {
				continue
			}
			r := deliveryRecord{Delivery: *d, Due: d.NextAttemptAt.UnixMilli()}
			v, err := json.Marshal(&r)
			if err != nil {
				return err
			}
			if err := dels.Put([]byte(d.ID), v); err != nil {
				return err
			}
			if err := queue.Put(msKey(r.Due, d.ID), nil); err != nil {
				return err
			}
			lb, err := logs.CreateBucketIfNotExists([]byte(d.WebhookID))
			if err != nil {
				return err
			}
			if err := lb.Put(msKey(d.CreatedAt.UnixMilli(), d.ID), nil); err != nil {
				return err
			}
			n, ok := logLen[d.WebhookID]
			if !ok {
				n = countKeys(lb)
			} else {
				n++
			}
			// The log keeps the newest MaxDeliveryLog deliveries; older
			// finished ones go, but a pending one stays until it is
			// delivered or given up: the log is not a reason to lose it.
			var drop [][]byte
			c := lb.Cursor()
			for k, _ := c.First(); k != nil && n-len(drop) > store.MaxDeliveryLog; k, _ = c.Next() {
				if pendingDelivery(b, string(k[8:])) {
					continue
				}
				drop = append(drop, append([]byte(nil), k...))
			}
			for _, k := range drop {
				if err := dropDelivery(b, string(k[8:])); err != nil {
					return err
				}
				if err := lb.Delete(k); err != nil {
					return err
				}
			}
			logLen[d.WebhookID] = n - len(drop)
		}
		return nil
	}), "enqueue deliveries")
}

// cursorAhead reports whether event id next is past cur (or cur is none).
func cursorAhead(next, cur string) bool {
	if cur == "" {
		return true
	}
	n, err1 := eventhub.ParseID(next)
	c, err2 := eventhub.ParseID(cur)
	return err1 == nil && (err2 != nil || c.Less(n))
}

// ClaimDeliveries implements store.Webhooks.
func (s *Store) ClaimDeliveries(ctx context.Context, accountID string, now time.Time, lease time.Duration, token string, limit int) ([]*store.Delivery, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrap(err, "claim deliveries")
	}
	var out []*store.Delivery
	err := s.write(func(tx *bolt.Tx) error {
		out = out[:0]
		b, _ := accountWebhooks(tx, accountID, false)
		if b == nil {
			return nil
		}
		queue, dels := b.Bucket(whQueue), b.Bucket(whDeliveries)
		var due [][]byte
		c := queue.Cursor()
		for k, _ := c.First(); k != nil && len(due) < limit; k, _ = c.Next() {
			if int64(binary.BigEndian.Uint64(k)) > now.UnixMilli() {
				break
			}
			due = append(due, bytes.Clone(k))
		}
		until := now.Add(lease).UnixMilli()
		for _, k := range due {
			id := k[8:]
			var r deliveryRecord
			if err := json.Unmarshal(dels.Get(id), &r); err != nil {
				return err
			}
			r.Lease, r.Due = token, until
			v, err := json.Marshal(&r)
			if err != nil {
				return err
			}
			if err := queue.Delete(k); err != nil {
				return err
			}
			if err := queue.Put(msKey(until, string(id)), nil); err != nil {
				return err
			}
			if err := dels.Put(id, v); err != nil {
				return err
			}
			d := r.Delivery
			out = append(out, &d)
		}
		return nil
	})
	if err != nil {
		return nil, wrap(err, "claim deliveries")
	}
	return out, nil
}

// FinishDelivery implements store.Webhooks.
func (s *Store) FinishDelivery(ctx context.Context, d *store.Delivery, token string) error {
	if err := ctx.Err(); err != nil {
		return wrap(err, "finish delivery")
	}
	return wrap(s.write(func(tx *bolt.Tx) error {
		b, _ := accountWebhooks(tx, d.AccountID, false)
		if b == nil {
			return store.Errorf(store.NotFound, "delivery not found")
		}
		queue, dels := b.Bucket(whQueue), b.Bucket(whDeliveries)
		v := dels.Get([]byte(d.ID))
		if v == nil {
			return store.Errorf(store.NotFound, "delivery not found")
		}
		var old deliveryRecord
		if err := json.Unmarshal(v, &old); err != nil {
			return err
		}
		if old.Lease != token {
			return store.Errorf(store.Conflict, "delivery lease lost")
		}
		if old.Due != 0 {
			if err := queue.Delete(msKey(old.Due, d.ID)); err != nil {
				return err
			}
		}
		r := deliveryRecord{Delivery: *d}
		if d.Status == store.DeliveryPending {
			r.Due = d.NextAttemptAt.UnixMilli()
			if err := queue.Put(msKey(r.Due, d.ID), nil); err != nil {
				return err
			}
		}
		nv, err := json.Marshal(&r)
		if err != nil {
			return err
		}
		return dels.Put([]byte(d.ID), nv)
	}), "finish delivery")
}

// ListDeliveries implements store.Webhooks.
func (s *Store) ListDeliveries(ctx context.Context, accountID, webhookID string, limit int) ([]*store.Delivery, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrap(err, "list deliveries")
	}
	out := []*store.Delivery{}
	err := s.db.View(func(tx *bolt.Tx) error {
		b, _ := accountWebhooks(tx, accountID, false)
		if b == nil {
			return nil
		}
		lb := b.Bucket(whLog).Bucket([]byte(webhookID))
		if lb == nil {
			return nil
		}
		dels := b.Bucket(whDeliveries)
		c := lb.Cursor()
		for k, _ := c.Last(); k != nil && len(out) < limit; k, _ = c.Prev() {
			v := dels.Get(k[8:])
			if v == nil {
				continue
			}
			var r deliveryRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			d := r.Delivery
			out = append(out, &d)
		}
		return nil
	})
	if err != nil {
		return nil, wrap(err, "list deliveries")
	}
	return out, nil
}
