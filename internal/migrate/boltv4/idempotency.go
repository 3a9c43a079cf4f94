package boltv4

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mailsink/mailsink/store"
)

var _ store.Idempotency = (*Store)(nil)

// Idempotency keys live in two buckets: bucketIdem maps account | 0 |
// sha256(key) to expiry | stored (1 byte) | uvarint(len) digest | ids joined
// by ",", and
// bucketIdemExpiry holds expiry | that same key, so that expired keys are
// found in time order and removed a few at a time by later reservations.
var (
	bucketIdem       = []byte("idem")
	bucketIdemExpiry = []byte("idemexp")
)

// expiredPerReserve bounds how many expired keys one Reserve removes.
const expiredPerReserve = 64

// Reserve implements store.Idempotency.
func (s *Store) Reserve(ctx context.Context, accountID, key string, r store.Reservation, ttl time.Duration) (store.Reservation, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Reservation{}, false, wrap(err, "reserve idempotency key")
	}
	k := idemKey(accountID, key)
	now := time.Now()
	var got store.Reservation
	fresh := false
	err := s.write(func(tx *bolt.Tx) error {
		got, fresh = store.Reservation{}, false
		idem, err := tx.CreateBucketIfNotExists(bucketIdem)
		if err != nil {
			return err
		}
		exp, err := tx.CreateBucketIfNotExists(bucketIdemExpiry)
		if err != nil {
			return err
		}
		if err := removeExpired(idem, exp, now); err != nil {
			return err
		}
		if v := idem.Get(k); v != nil {
			if rec, ok := decodeReservation(v); ok && rec.expiry.After(now) {
				got = rec.Reservation
				return nil
			}
		}
		expiry := now.Add(ttl)
		if err := idem.Put(k, encodeReservation(expiry, r)); err != nil {
			return err
		}
		got, fresh = r, true
		return exp.Put(append(binary.BigEndian.AppendUint64(nil, uint64(expiry.UnixMilli())), k...), nil)
	})
	if err != nil {
		return store.Reservation{}, false, wrap(err, "reserve idempotency key")
	}
	return got, fresh, nil
}

// Settle implements store.Idempotency.
func (s *Store) Settle(ctx context.Context, accountID, key string) error {
	if err := ctx.Err(); err != nil {
		return wrap(err, "settle idempotency key")
	}
	k := idemKey(accountID, key)
	err := s.write(func(tx *bolt.Tx) error {
		idem := tx.Bucket(bucketIdem)
		if idem == nil {
			return nil
		}
		v := idem.Get(k)
		rec, ok := decodeReservation(v)
		if !ok {
			return nil
		}
		rec.Stored = true
		return idem.Put(k, encodeReservation(rec.expiry, rec.Reservation))
	})
	return wrap(err, "settle idempotency key")
}

// Release implements store.Idempotency.
func (s *Store) Release(ctx context.Context, accountID, key string) error {
	if err := ctx.Err(); err != nil {
		return wrap(err, "release idempotency key")
	}
	k := idemKey(accountID, key)
	err := s.write(func(tx *bolt.Tx) error {
		idem := tx.Bucket(bucketIdem)
		if idem == nil {
			return nil
		}
		if rec, ok := decodeReservation(idem.Get(k)); ok && !rec.Stored {
			return idem.Delete(k)
		}
		return nil
	})
	return wrap(err, "release idempotency key")
}

func idemKey(accountID, key string) []byte {
	sum := sha256.Sum256([]byte(key))
	return append(append([]byte(accountID), 0), sum[:]...)
}

// removeExpired deletes up to expiredPerReserve keys whose time has passed.
func removeExpired(idem, exp *bolt.Bucket, now time.Time) error {
	c := exp.Cursor()
	limit := binary.BigEndian.AppendUint64(nil, uint64(now.UnixMilli()))
	var done [][]byte
	for k, _ := c.First(); k != nil && len(done) < expiredPerReserve && bytes.Compare(k[:8], limit) <= 0; k, _ = c.Next() {
		done = append(done, append([]byte(nil), k...))
	}
	for _, k := range done {
		if v := idem.Get(k[8:]); v != nil {
			if rec, ok := decodeReservation(v); !ok || !rec.expiry.After(now) {
				if err := idem.Delete(k[8:]); err != nil {
					return err
				}
			}
		}
		if err := exp.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

type reservationRecord struct {
	store.Reservation
	expiry time.Time
}

func encodeReservation(expiry time.Time, r store.Reservation) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(expiry.UnixMilli()))
	stored := byte(0)
	if r.Stored {
		stored = 1
	}
	b = append(b, stored)
	b = binary.AppendUvarint(b, uint64(len(r.Digest)))
	b = append(b, r.Digest...)
	return append(b, strings.Join(r.IDs, ",")...)
}

func decodeReservation(v []byte) (reservationRecord, bool) {
	if len(v) < 9 {
		return reservationRecord{}, false
	}
	expiry := time.UnixMilli(int64(binary.BigEndian.Uint64(v)))
	stored := v[8] == 1
	n, m := binary.Uvarint(v[9:])
	if m <= 0 || uint64(len(v)-9-m) < n {
		return reservationRecord{}, false
	}
	rest := v[9+m:]
	r := store.Reservation{Digest: string(rest[:n]), Stored: stored}
	if ids := string(rest[n:]); ids != "" {
		r.IDs = strings.Split(ids, ",")
	}
	return reservationRecord{Reservation: r, expiry: expiry}, true
}
