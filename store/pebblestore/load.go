package pebblestore

import (
	"encoding/binary"
	"encoding/json"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mailsink/mailsink/store"
)

// Loader writes the records of another store into a new, empty one: package
// migrate moves a data directory of an older release with it. It writes
// records as they are given (ids, timestamps, states, counts), publishes no
// events and checks no room; nothing it writes is durable before Finish
// returns. It is not safe for concurrent use, and the store must not be
// used by anything else meanwhile.
type Loader struct {
	s *Store
	b *pebble.Batch
}

// loadBatch is the size past which a Loader commits its batch.
const loadBatch = 4 << 20

// NewLoader returns a Loader into s.
func (s *Store) NewLoader() *Loader { return &Loader{s: s, b: s.db.NewBatch()} }

// set adds key and value to the batch, and commits it once it is large.
func (l *Loader) set(key, value []byte) error {
	if err := l.b.Set(key, value, nil); err != nil {
		return err
	}
	if l.b.Len() < loadBatch {
		return nil
	}
	return l.commit(pebble.NoSync)
}

func (l *Loader) commit(sync *pebble.WriteOptions) error {
	if l.s.memory {
		sync = pebble.NoSync
	}
	err := l.s.db.Apply(l.b, sync)
	l.b.Close()
	l.b = l.s.db.NewBatch()
	return err
}

// Body stores the body bodyID of the account, which refs emails share.
func (l *Loader) Body(accountID, bodyID string, body *store.Body, refs int) error {
	if refs > 1 {
		if err := l.set(refsKey(accountID, bodyID), binary.AppendUvarint(nil, uint64(refs))); err != nil {
			return err
		}
	}
	return l.set(bodyKey(accountID, bodyID), encodeBody(&l.s.zip, body))
}

// Email stores e, whose body is bodyID, with its index entries. The
// account's totals come with Stats.
func (l *Loader) Email(e *store.Email, bodyID string) error {
	rec := encodeEmail(&emailRecord{Email: *e, BodyID: bodyID})
	if err := l.set(emailKey(e.AccountID, e.ID), rec); err != nil {
		return err
	}
	for _, k := range indexKeys(e) {
		if err := l.set(k, indexValue(rec)); err != nil {
			return err
		}
	}
	return nil
}

// Check stores the result of an email's check.
func (l *Loader) Check(accountID, emailID, name string, result []byte) error {
	return l.set(checkKey(accountID, emailID, name), result)
}

// Stats stores the account's totals.
func (l *Loader) Stats(accountID string, emails, rawBytes int64) error {
	if emails == 0 {
		return nil
	}
	v := binary.AppendVarint(nil, emails)
	return l.set(statsKey(accountID), binary.AppendVarint(v, rawBytes))
}

// Fault stores a fault rule.
func (l *Loader) Fault(r *store.FaultRule) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return l.set(faultKey(r.AccountID, r.ID), v)
}

// Webhook stores a webhook.
func (l *Loader) Webhook(w *store.Webhook) error {
	v, err := json.Marshal(w)
	if err != nil {
		return err
	}
	if err := l.set(webhookAccountKey(w.AccountID), nil); err != nil {
		return err
	}
	return l.set(webhookKey(w.AccountID, w.ID), v)
}

// Delivery stores a delivery in its webhook's log and, when due is not 0,
// in the queue at due (Unix ms) under the lease it holds.
func (l *Loader) Delivery(d *store.Delivery, lease string, due int64) error {
	v, err := json.Marshal(&deliveryRecord{Delivery: *d, Lease: lease, Due: due})
	if err != nil {
		return err
	}
	if err := l.set(deliveryKey(d.AccountID, d.ID), v); err != nil {
		return err
	}
	if due != 0 {
		if err := l.set(queueKey(d.AccountID, due, d.ID), nil); err != nil {
			return err
		}
	}
	return l.set(logKey(d.AccountID, d.WebhookID, d.CreatedAt.UnixMilli(), d.ID), nil)
}

// WebhookCursor records that the account has (or had) webhooks, and the
// last event turned into deliveries unless cursor is "".
func (l *Loader) WebhookCursor(accountID, cursor string) error {
	if err := l.set(webhookAccountKey(accountID), nil); err != nil {
		return err
	}
	if cursor == "" {
		return nil
	}
	return l.set(whKey(accountID, whCursor, 0), []byte(cursor))
}

// Reservation stores an idempotency key, by its SHA-256 digest, until
// expiry.
func (l *Loader) Reservation(accountID string, keyDigest [32]byte, expiry time.Time, r store.Reservation) error {
	if err := l.set(idemKey(accountID, keyDigest), encodeReservation(expiry, r)); err != nil {
		return err
	}
	return l.set(idemExpiryKey(accountID, expiry, keyDigest), nil)
}

// Finish commits what is left, syncs it and flushes the memtables to the
// store's files. The Loader must not be used afterwards.
func (l *Loader) Finish() error {
	if err := l.commit(pebble.Sync); err != nil {
		l.b.Close()
		return wrap(err, "load")
	}
	l.b.Close()
	return wrap(l.s.db.Flush(), "load")
}

// Abandon lets go of what was not committed.
func (l *Loader) Abandon() { l.b.Close() }
