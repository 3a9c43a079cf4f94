package boltstore

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
// sha256(key) to expiry | uvarint(len) digest | ids joined by ",", and
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
	sum := sha256.Sum256([]byte(key))
	k := append(append([]byte(accountID), 0), sum[:]...)
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
	b = binary.AppendUvarint(b, uint64(len(r.Digest)))
	b = append(b, r.Digest...)
	return append(b, strings.Join(r.IDs, ",")...)
}

func decodeReservation(v []byte) (reservationRecord, bool) {
	if len(v) < 8 {
		return reservationRecord{}, false
	}
	expiry := time.UnixMilli(int64(binary.BigEndian.Uint64(v)))
	n, m := binary.Uvarint(v[8:])
	if m <= 0 || uint64(len(v)-8-m) < n {
		return reservationRecord{}, false
	}
	rest := v[8+m:]
	r := store.Reservation{Digest: string(rest[:n])}
	if ids := string(rest[n:]); ids != "" {
		r.IDs = strings.Split(ids, ",")
	}
	return reservationRecord{Reservation: r, expiry: expiry}, true
}
