package boltv4

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mailsink/mailsink/store"
)

// Sink receives the records of a store in Export. Body ids are the old
// store's, as text: a body comes before the first email that has it.
type Sink interface {
	Body(accountID, bodyID string, body *store.Body, refs int) error
	Email(e *store.Email, bodyID string) error
	Check(accountID, emailID, name string, result []byte) error
	Stats(accountID string, emails, rawBytes int64) error
	Fault(r *store.FaultRule) error
	Webhook(w *store.Webhook) error
	Delivery(d *store.Delivery, lease string, due int64) error
	// WebhookCursor comes once for every account that has (or had)
	// webhooks; cursor is "" when no event was turned into deliveries.
	WebhookCursor(accountID, cursor string) error
	Reservation(accountID string, keyDigest [32]byte, expiry time.Time, r store.Reservation) error
}

// exportCheckEvery is how many records Export handles between two looks
// at its context.
const exportCheckEvery = 256

// Export applies what the write-ahead log holds, then hands every record
// of the store to sink from one read transaction: the emails with their
// bodies, check results and accounts' totals, fault rules, webhooks with
// their deliveries and cursors, and the idempotency keys not yet expired.
// Dashboard sessions are in memory only and event history starts afresh,
// so neither is exported. It stops at the first error, sink's included.
func (s *Store) Export(ctx context.Context, sink Sink) error {
	if err := s.wal.settleAll(ctx); err != nil {
		return wrap(err, "export")
	}
	return s.db.View(func(tx *bolt.Tx) error {
		for _, step := range []func(context.Context, *bolt.Tx, Sink) error{
			exportEmails, exportChecks, exportStats, exportFaults, exportWebhooks, exportReservations,
		} {
			if err := step(ctx, tx, sink); err != nil {
				return err
			}
		}
		return nil
	})
}

// bodyName is a body's id as a Sink sees it.
func bodyName(id uint64) string { return fmt.Sprintf("v4-%016x", id) }

func exportEmails(ctx context.Context, tx *bolt.Tx, sink Sink) error {
	bodies, refs := tx.Bucket(bucketBodies), tx.Bucket(bucketRefs)
	// The shared bodies already handed over; a body of one email is met
	// once.
	shared := map[uint64]bool{}
	c := tx.Bucket(bucketEmails).Cursor()
	n := 0
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if n++; n%exportCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		r, err := decodeEmail(k, v)
		if err != nil {
			return fmt.Errorf("email %x: %w", k, err)
		}
		count := 1
		if rv := refs.Get(bodyKey(r.BodyID)); rv != nil {
			c, size := binary.Uvarint(rv)
			if size <= 0 || c == 0 {
				return fmt.Errorf("body %d has reference count %x: %w", r.BodyID, rv, errCorrupt)
			}
			count = int(c)
		}
		if count == 1 || !shared[r.BodyID] {
			bv := bodies.Get(bodyKey(r.BodyID))
			if bv == nil {
				return fmt.Errorf("email %s: body %d is missing: %w", r.ID, r.BodyID, errCorrupt)
			}
			body, err := decodeBody(bv)
			if err != nil {
				return fmt.Errorf("body %d: %w", r.BodyID, err)
			}
			if err := sink.Body(r.AccountID, bodyName(r.BodyID), body, count); err != nil {
				return err
			}
			if count > 1 {
				shared[r.BodyID] = true
			}
		}
		if err := sink.Email(&r.Email, bodyName(r.BodyID)); err != nil {
			return err
		}
	}
	return nil
}

// splitAccount returns the account a key starts with and the rest.
func splitAccount(k []byte) (accountID string, rest []byte, err error) {
	n, size := binary.Uvarint(k)
	if size <= 0 || n > uint64(len(k)-size) {
		return "", nil, fmt.Errorf("key %x: %w", k, errCorrupt)
	}
	return string(k[size : size+int(n)]), k[size+int(n):], nil
}

func exportChecks(_ context.Context, tx *bolt.Tx, sink Sink) error {
	b := tx.Bucket(bucketChecks)
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, v []byte) error {
		accountID, rest, err := splitAccount(k)
		if err != nil {
			return err
		}
		id, name, ok := bytes.Cut(rest, []byte{0})
		if !ok {
			return fmt.Errorf("check key %x: %w", k, errCorrupt)
		}
		return sink.Check(accountID, string(id), string(name), v)
	})
}

func exportStats(_ context.Context, tx *bolt.Tx, sink Sink) error {
	return tx.Bucket(bucketStats).ForEach(func(k, _ []byte) error {
		accountID, rest, err := splitAccount(k)
		if err != nil || len(rest) != 0 {
			return fmt.Errorf("stats key %x: %w", k, errCorrupt)
		}
		emails, rawBytes, err := readStats(tx, accountID)
		if err != nil {
			return err
		}
		return sink.Stats(accountID, emails, rawBytes)
	})
}

func exportFaults(_ context.Context, tx *bolt.Tx, sink Sink) error {
	top := tx.Bucket(bucketFaults)
	return top.ForEachBucket(func(account []byte) error {
		rules, err := decodeFaults(top.Bucket(account))
		if err != nil {
			return err
		}
		for _, r := range rules {
			if err := sink.Fault(r); err != nil {
				return err
			}
		}
		return nil
	})
}

func exportWebhooks(_ context.Context, tx *bolt.Tx, sink Sink) error {
	top := tx.Bucket(bucketWebhooks)
	if top == nil {
		return nil
	}
	return top.ForEachBucket(func(account []byte) error {
		b := top.Bucket(account)
		if err := sink.WebhookCursor(string(account), string(b.Get(whCursor))); err != nil {
			return err
		}
		if subs := b.Bucket(whSubs); subs != nil {
			err := subs.ForEach(func(_, v []byte) error {
				w := new(store.Webhook)
				if err := json.Unmarshal(v, w); err != nil {
					return errCorrupt
				}
				return sink.Webhook(w)
			})
			if err != nil {
				return err
			}
		}
		if del := b.Bucket(whDeliveries); del != nil {
			return del.ForEach(func(_, v []byte) error {
				r := new(deliveryRecord)
				if err := json.Unmarshal(v, r); err != nil {
					return errCorrupt
				}
				return sink.Delivery(&r.Delivery, r.Lease, r.Due)
			})
		}
		return nil
	})
}

func exportReservations(_ context.Context, tx *bolt.Tx, sink Sink) error {
	b := tx.Bucket(bucketIdem)
	if b == nil {
		return nil
	}
	now := time.Now()
	return b.ForEach(func(k, v []byte) error {
		// account | 0 | sha256(key)
		if len(k) < 33 || k[len(k)-33] != 0 {
			return fmt.Errorf("idempotency key %x: %w", k, errCorrupt)
		}
		rec, ok := decodeReservation(v)
		if !ok {
			return fmt.Errorf("idempotency key %x: %w", k, errCorrupt)
		}
		if !rec.expiry.After(now) {
			return nil
		}
		var digest [32]byte
		copy(digest[:], k[len(k)-32:])
		return sink.Reservation(string(k[:len(k)-33]), digest, rec.expiry, rec.Reservation)
	})
}
