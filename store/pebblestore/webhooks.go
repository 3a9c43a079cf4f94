package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mailsink/mailsink/internal/eventhub"
	"github.com/mailsink/mailsink/store"
)

// An account's webhooks and their deliveries:
//
//	'W' account                                          -> empty: the account has (or had) a webhook
//	'a' account 'w' 's' webhook id                       -> webhook, JSON
//	'a' account 'w' 'd' delivery id                      -> deliveryRecord, JSON
//	'a' account 'w' 'q' due (8 bytes, ms) | delivery id  -> empty: pending deliveries by due time
//	'a' account 'w' 'l' len | webhook id | created (8) | delivery id -> empty: the webhook's deliveries by age
//	'a' account 'w' 'c'                                  -> the last event turned into deliveries
//
// A claimed delivery's queue key moves to the end of its lease, so that it
// is handed out again only if its holder never finishes it.
const (
	whSubs       byte = 's'
	whDeliveries byte = 'd'
	whQueue      byte = 'q'
	whLog        byte = 'l'
	whCursor     byte = 'c'
)

var _ store.Webhooks = (*Store)(nil)

// deliveryRecord is a delivery as stored, with its lease and queue place.
type deliveryRecord struct {
	store.Delivery
	Lease string `json:"lease,omitempty"`
	Due   int64  `json:"due"` // the queue key's time, ms; 0 when not queued
}

func whKey(accountID string, kind byte, extra int) []byte {
	return append(accountKey(accountID, partWebhook, 1+extra), kind)
}

func webhookKey(accountID, id string) []byte {
	return append(whKey(accountID, whSubs, len(id)), id...)
}

func deliveryKey(accountID, id string) []byte {
	return append(whKey(accountID, whDeliveries, len(id)), id...)
}

func queueKey(accountID string, due int64, id string) []byte {
	k := binary.BigEndian.AppendUint64(whKey(accountID, whQueue, 8+len(id)), uint64(due))
	return append(k, id...)
}

func logPrefix(accountID, webhookID string) []byte {
	k := binary.AppendUvarint(whKey(accountID, whLog, 2+len(webhookID)+8+36), uint64(len(webhookID)))
	return append(k, webhookID...)
}

func logKey(accountID, webhookID string, created int64, id string) []byte {
	k := binary.BigEndian.AppendUint64(logPrefix(accountID, webhookID), uint64(created))
	return append(k, id...)
}

func webhookAccountKey(accountID string) []byte { return append([]byte{tagWebhooks}, accountID...) }

func webhookNotFound() error { return store.Errorf(store.NotFound, "webhook not found") }

// keysUnder returns the keys that start with prefix, in order, at most limit
// of them (0: all).
func keysUnder(r pebble.Reader, prefix []byte, limit int) ([][]byte, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out [][]byte
	for valid := it.First(); valid && (limit == 0 || len(out) < limit); valid = it.Next() {
		out = append(out, bytes.Clone(it.Key()))
	}
	return out, it.Error()
}

// CreateWebhook implements store.Webhooks.
func (s *Store) CreateWebhook(ctx context.Context, w *store.Webhook, max int) error {
	if err := s.enter(ctx, "create webhook"); err != nil {
		return err
	}
	defer s.leave()
	v, err := json.Marshal(w)
	if err != nil {
		return store.Wrap(store.Internal, err, "encode webhook")
	}
	_, err = s.change(func(b *pebble.Batch) (int, error) {
		subs, err := keysUnder(s.db, whKey(w.AccountID, whSubs, 0), 0)
		if err != nil {
			return 0, err
		}
		if len(subs) >= max {
			return 0, store.Errorf(store.Conflict, "the account has %d webhooks already, the most it may have", max)
		}
		if err := b.Set(webhookAccountKey(w.AccountID), nil, nil); err != nil {
			return 0, err
		}
		return 0, b.Set(webhookKey(w.AccountID, w.ID), v, nil)
	})
	return wrap(err, "create webhook")
}

// GetWebhook implements store.Webhooks.
func (s *Store) GetWebhook(ctx context.Context, accountID, id string) (*store.Webhook, error) {
	if err := s.enter(ctx, "get webhook"); err != nil {
		return nil, err
	}
	defer s.leave()
	w, err := s.readWebhook(accountID, id)
	return w, wrap(err, "get webhook")
}

func (s *Store) readWebhook(accountID, id string) (*store.Webhook, error) {
	v, err := s.get(webhookKey(accountID, id))
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, webhookNotFound()
	}
	w := new(store.Webhook)
	if err := json.Unmarshal(v, w); err != nil {
		return nil, errCorrupt
	}
	return w, nil
}

// ListWebhooks implements store.Webhooks.
func (s *Store) ListWebhooks(ctx context.Context, accountID string) ([]*store.Webhook, error) {
	if err := s.enter(ctx, "list webhooks"); err != nil {
		return nil, err
	}
	defer s.leave()
	prefix := whKey(accountID, whSubs, 0)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, wrap(err, "list webhooks")
	}
	defer it.Close()
	out := []*store.Webhook{}
	for valid := it.First(); valid; valid = it.Next() {
		w := new(store.Webhook)
		if err := json.Unmarshal(it.Value(), w); err != nil {
			return nil, wrap(errCorrupt, "list webhooks")
		}
		out = append(out, w)
	}
	// In key order: ids are time-ordered, so oldest first.
	return out, wrap(it.Error(), "list webhooks")
}

// DeleteWebhook implements store.Webhooks.
func (s *Store) DeleteWebhook(ctx context.Context, accountID, id string) error {
	if err := s.enter(ctx, "delete webhook"); err != nil {
		return err
	}
	defer s.leave()
	_, err := s.change(func(b *pebble.Batch) (int, error) {
		if found, err := s.has(webhookKey(accountID, id)); err != nil || !found {
			if err == nil {
				err = webhookNotFound()
			}
			return 0, err
		}
		if err := b.Delete(webhookKey(accountID, id), nil); err != nil {
			return 0, err
		}
		prefix := logPrefix(accountID, id)
		logs, err := keysUnder(s.db, prefix, 0)
		if err != nil {
			return 0, err
		}
		for _, k := range logs {
			if err := s.dropDelivery(b, accountID, string(k[len(prefix)+8:])); err != nil {
				return 0, err
			}
			if err := b.Delete(k, nil); err != nil {
				return 0, err
			}
		}
		return 0, nil
	})
	return wrap(err, "delete webhook")
}

// readDelivery returns the delivery id of the account, or nil.
func (s *Store) readDelivery(accountID, id string) (*deliveryRecord, error) {
	v, err := s.get(deliveryKey(accountID, id))
	if err != nil || v == nil {
		return nil, err
	}
	r := new(deliveryRecord)
	if err := json.Unmarshal(v, r); err != nil {
		return nil, errCorrupt
	}
	return r, nil
}

// dropDelivery removes a delivery and its queue entry (not its log entry).
func (s *Store) dropDelivery(b *pebble.Batch, accountID, id string) error {
	r, err := s.readDelivery(accountID, id)
	if err != nil || r == nil {
		return err
	}
	if r.Due != 0 {
		if err := b.Delete(queueKey(accountID, r.Due, id), nil); err != nil {
			return err
		}
	}
	return b.Delete(deliveryKey(accountID, id), nil)
}

// DisableWebhook implements store.Webhooks.
func (s *Store) DisableWebhook(ctx context.Context, accountID, id, reason string, at time.Time) error {
	if err := s.enter(ctx, "disable webhook"); err != nil {
		return err
	}
	defer s.leave()
	_, err := s.change(func(b *pebble.Batch) (int, error) {
		w, err := s.readWebhook(accountID, id)
		if err != nil || w.DisabledAt != nil {
			return 0, err
		}
		w.DisabledAt, w.DisabledReason = &at, reason
		v, err := json.Marshal(w)
		if err != nil {
			return 0, err
		}
		return 0, b.Set(webhookKey(accountID, id), v, nil)
	})
	return wrap(err, "disable webhook")
}

// WebhookAccounts implements store.Webhooks.
func (s *Store) WebhookAccounts(ctx context.Context) ([]string, error) {
	if err := s.enter(ctx, "webhook accounts"); err != nil {
		return nil, err
	}
	defer s.leave()
	keys, err := keysUnder(s.db, []byte{tagWebhooks}, 0)
	if err != nil {
		return nil, wrap(err, "webhook accounts")
	}
	var out []string
	for _, k := range keys {
		out = append(out, string(k[1:]))
	}
	return out, nil
}

// WebhookCursor implements store.Webhooks.
func (s *Store) WebhookCursor(ctx context.Context, accountID string) (string, error) {
	if err := s.enter(ctx, "webhook cursor"); err != nil {
		return "", err
	}
	defer s.leave()
	v, err := s.get(whKey(accountID, whCursor, 0))
	return string(v), wrap(err, "webhook cursor")
}

// EnqueueDeliveries implements store.Webhooks.
func (s *Store) EnqueueDeliveries(ctx context.Context, accountID, cursor string, ds []*store.Delivery) error {
	if err := s.enter(ctx, "enqueue deliveries"); err != nil {
		return err
	}
	defer s.leave()
	_, err := s.change(func(b *pebble.Batch) (int, error) {
		if err := b.Set(webhookAccountKey(accountID), nil, nil); err != nil {
			return 0, err
		}
		if cursor != "" {
			cur, err := s.get(whKey(accountID, whCursor, 0))
			if err != nil {
				return 0, err
			}
			if cursorAhead(cursor, string(cur)) {
				if err := b.Set(whKey(accountID, whCursor, 0), []byte(cursor), nil); err != nil {
					return 0, err
				}
			}
		}
		// What this batch adds and drops is not in the store yet: the
		// checks below see it through these.
		added := map[string]bool{}
		logs := map[string][][]byte{} // by webhook: its log keys, oldest first
		for _, d := range ds {
			// A delivery already queued is not queued twice, and one of a
			// webhook deleted meanwhile leaves no log behind.
			if added[d.ID] {
				continue
			}
			if found, err := s.has(deliveryKey(accountID, d.ID)); err != nil || found {
				if err != nil {
					return 0, err
				}
				continue
			}
			if found, err := s.has(webhookKey(accountID, d.WebhookID)); err != nil || !found {
				if err != nil {
					return 0, err
				}
				continue
			}
			r := deliveryRecord{Delivery: *d, Due: d.NextAttemptAt.UnixMilli()}
			v, err := json.Marshal(&r)
			if err != nil {
				return 0, err
			}
			if err := b.Set(deliveryKey(accountID, d.ID), v, nil); err != nil {
				return 0, err
			}
			if err := b.Set(queueKey(accountID, r.Due, d.ID), nil, nil); err != nil {
				return 0, err
			}
			added[d.ID] = true
			lk := logKey(accountID, d.WebhookID, d.CreatedAt.UnixMilli(), d.ID)
			if err := b.Set(lk, nil, nil); err != nil {
				return 0, err
			}
			log, ok := logs[d.WebhookID]
			if !ok {
				if log, err = keysUnder(s.db, logPrefix(accountID, d.WebhookID), 0); err != nil {
					return 0, err
				}
			}
			log = insertSorted(log, lk)
			// The log keeps the newest MaxDeliveryLog deliveries; older
			// finished ones go, but a pending one stays until it is
			// delivered or given up: the log is not a reason to lose it.
			prefix := len(logPrefix(accountID, d.WebhookID)) + 8
			kept := log[:0]
			over := len(log) - store.MaxDeliveryLog
			for _, k := range log {
				id := string(k[prefix:])
				if over > 0 && !added[id] {
					r, err := s.readDelivery(accountID, id)
					if err != nil {
						return 0, err
					}
					if r == nil || r.Due == 0 {
						if err := s.dropDelivery(b, accountID, id); err != nil {
							return 0, err
						}
						if err := b.Delete(k, nil); err != nil {
							return 0, err
						}
						over--
						continue
					}
				}
				kept = append(kept, k)
			}
			logs[d.WebhookID] = kept
		}
		return 0, nil
	})
	return wrap(err, "enqueue deliveries")
}

// insertSorted inserts k into the sorted keys.
func insertSorted(keys [][]byte, k []byte) [][]byte {
	i := len(keys)
	for i > 0 && bytes.Compare(keys[i-1], k) > 0 {
		i--
	}
	keys = append(keys, nil)
	copy(keys[i+1:], keys[i:])
	keys[i] = k
	return keys
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
	if err := s.enter(ctx, "claim deliveries"); err != nil {
		return nil, err
	}
	defer s.leave()
	var out []*store.Delivery
	_, err := s.change(func(b *pebble.Batch) (int, error) {
		prefix := whKey(accountID, whQueue, 0)
		upper := binary.BigEndian.AppendUint64(bytes.Clone(prefix), uint64(now.UnixMilli())+1)
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: upper})
		if err != nil {
			return 0, err
		}
		var due [][]byte
		for valid := it.First(); valid && len(due) < limit; valid = it.Next() {
			due = append(due, bytes.Clone(it.Key()))
		}
		if err := errorsJoin(it.Error(), it.Close()); err != nil {
			return 0, err
		}
		until := now.Add(lease).UnixMilli()
		for _, k := range due {
			id := string(k[len(prefix)+8:])
			r, err := s.readDelivery(accountID, id)
			if err != nil {
				return 0, err
			}
			if r == nil {
				return 0, internalf("queued delivery %s is missing", id)
			}
			r.Lease, r.Due = token, until
			v, err := json.Marshal(r)
			if err != nil {
				return 0, err
			}
			if err := b.Delete(k, nil); err != nil {
				return 0, err
			}
			if err := b.Set(queueKey(accountID, until, id), nil, nil); err != nil {
				return 0, err
			}
			if err := b.Set(deliveryKey(accountID, id), v, nil); err != nil {
				return 0, err
			}
			d := r.Delivery
			out = append(out, &d)
		}
		return 0, nil
	})
	if err != nil {
		return nil, wrap(err, "claim deliveries")
	}
	return out, nil
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// FinishDelivery implements store.Webhooks.
func (s *Store) FinishDelivery(ctx context.Context, d *store.Delivery, token string) error {
	if err := s.enter(ctx, "finish delivery"); err != nil {
		return err
	}
	defer s.leave()
	_, err := s.change(func(b *pebble.Batch) (int, error) {
		old, err := s.readDelivery(d.AccountID, d.ID)
		if err != nil {
			return 0, err
		}
		if old == nil {
			return 0, store.Errorf(store.NotFound, "delivery not found")
		}
		if old.Lease != token {
			return 0, store.Errorf(store.Conflict, "delivery lease lost")
		}
		if old.Due != 0 {
			if err := b.Delete(queueKey(d.AccountID, old.Due, d.ID), nil); err != nil {
				return 0, err
			}
		}
		r := deliveryRecord{Delivery: *d}
		if d.Status == store.DeliveryPending {
			r.Due = d.NextAttemptAt.UnixMilli()
			if err := b.Set(queueKey(d.AccountID, r.Due, d.ID), nil, nil); err != nil {
				return 0, err
			}
		}
		v, err := json.Marshal(&r)
		if err != nil {
			return 0, err
		}
		return 0, b.Set(deliveryKey(d.AccountID, d.ID), v, nil)
	})
	return wrap(err, "finish delivery")
}

// ListDeliveries implements store.Webhooks.
func (s *Store) ListDeliveries(ctx context.Context, accountID, webhookID string, limit int) ([]*store.Delivery, error) {
	if err := s.enter(ctx, "list deliveries"); err != nil {
		return nil, err
	}
	defer s.leave()
	snap := s.db.NewSnapshot()
	defer snap.Close()
	prefix := logPrefix(accountID, webhookID)
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, wrap(err, "list deliveries")
	}
	defer it.Close()
	out := []*store.Delivery{}
	for valid := it.Last(); valid && len(out) < limit; valid = it.Prev() {
		v, closer, err := snap.Get(deliveryKey(accountID, string(it.Key()[len(prefix)+8:])))
		if err == pebble.ErrNotFound {
			continue
		}
		if err != nil {
			return nil, wrap(err, "list deliveries")
		}
		var r deliveryRecord
		err = json.Unmarshal(v, &r)
		closer.Close()
		if err != nil {
			return nil, wrap(errCorrupt, "list deliveries")
		}
		d := r.Delivery
		out = append(out, &d)
	}
	return out, wrap(it.Error(), "list deliveries")
}
