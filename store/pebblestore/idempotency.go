package pebblestore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mailsink/mailsink/store"
)

var _ store.Idempotency = (*Store)(nil)

// Idempotency keys are kept under their SHA-256 digest:
//
//	'a' account 'k' 'r' sha256(key)           -> expiry (Unix ms, 8 bytes) | stored (1 byte) | uvarint(len) digest | ids joined by ","
//	'a' account 'k' 'x' expiry sha256(key)    -> empty
//
// so that the account's expired keys are found in time order and removed a
// few at a time by its later reservations.
const (
	idemRecord byte = 'r'
	idemExpiry byte = 'x'
)

// expiredPerReserve bounds how many expired keys one Reserve removes.
const expiredPerReserve = 64

func idemKey(accountID string, digest [32]byte) []byte {
	k := accountKey(accountID, partIdempotency, 1+len(digest))
	k = append(k, idemRecord)
	return append(k, digest[:]...)
}

func idemExpiryKey(accountID string, expiry time.Time, digest [32]byte) []byte {
	k := accountKey(accountID, partIdempotency, 9+len(digest))
	k = append(k, idemExpiry)
	k = binary.BigEndian.AppendUint64(k, uint64(expiry.UnixMilli()))
	return append(k, digest[:]...)
}

// Reserve implements store.Idempotency.
func (s *Store) Reserve(ctx context.Context, accountID, key string, r store.Reservation, ttl time.Duration) (store.Reservation, bool, error) {
	if err := s.enter(ctx, "reserve idempotency key"); err != nil {
		return store.Reservation{}, false, err
	}
	defer s.leave()
	digest := sha256.Sum256([]byte(key))
	k := idemKey(accountID, digest)
	now := time.Now()
	var got store.Reservation
	fresh := false
	_, err := s.change(func(b *pebble.Batch) (int, error) {
		if err := s.removeExpired(b, accountID, now); err != nil {
			return 0, err
		}
		v, err := s.get(k)
		if err != nil {
			return 0, err
		}
		if rec, ok := decodeReservation(v); ok && rec.expiry.After(now) {
			got = rec.Reservation
			return 0, nil
		}
		expiry := now.Add(ttl)
		got, fresh = r, true
		if err := b.Set(k, encodeReservation(expiry, r), nil); err != nil {
			return 0, err
		}
		return 0, b.Set(idemExpiryKey(accountID, expiry, digest), nil, nil)
	})
	if err != nil {
		return store.Reservation{}, false, wrap(err, "reserve idempotency key")
	}
	return got, fresh, nil
}

// Settle implements store.Idempotency.
func (s *Store) Settle(ctx context.Context, accountID, key string) error {
	if err := s.enter(ctx, "settle idempotency key"); err != nil {
		return err
	}
	defer s.leave()
	k := idemKey(accountID, sha256.Sum256([]byte(key)))
	_, err := s.change(func(b *pebble.Batch) (int, error) {
		v, err := s.get(k)
		if err != nil {
			return 0, err
		}
		rec, ok := decodeReservation(v)
		if !ok {
			return 0, nil
		}
		rec.Stored = true
		return 0, b.Set(k, encodeReservation(rec.expiry, rec.Reservation), nil)
	})
	return wrap(err, "settle idempotency key")
}

// Release implements store.Idempotency.
func (s *Store) Release(ctx context.Context, accountID, key string) error {
	if err := s.enter(ctx, "release idempotency key"); err != nil {
		return err
	}
	defer s.leave()
	k := idemKey(accountID, sha256.Sum256([]byte(key)))
	_, err := s.change(func(b *pebble.Batch) (int, error) {
		v, err := s.get(k)
		if err != nil {
			return 0, err
		}
		if rec, ok := decodeReservation(v); ok && !rec.Stored {
			return 0, b.Delete(k, nil)
		}
		return 0, nil
	})
	return wrap(err, "release idempotency key")
}

// removeExpired deletes up to expiredPerReserve of the account's keys whose
// time has passed. Called by change's fill.
func (s *Store) removeExpired(b *pebble.Batch, accountID string, now time.Time) error {
	prefix := append(accountKey(accountID, partIdempotency, 1), idemExpiry)
	limit := binary.BigEndian.AppendUint64(bytes.Clone(prefix), uint64(now.UnixMilli())+1)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: limit})
	if err != nil {
		return err
	}
	defer it.Close()
	done := 0
	for valid := it.First(); valid && done < expiredPerReserve; valid = it.Next() {
		k := it.Key()
		if len(k) != len(prefix)+8+32 {
			return internalf("idempotency expiry key %x", k)
		}
		var digest [32]byte
		copy(digest[:], k[len(prefix)+8:])
		rk := idemKey(accountID, digest)
		v, err := s.get(rk)
		if err != nil {
			return err
		}
		if rec, ok := decodeReservation(v); v != nil && (!ok || !rec.expiry.After(now)) {
			if err := b.Delete(rk, nil); err != nil {
				return err
			}
		}
		if err := b.Delete(k, nil); err != nil {
			return err
		}
		done++
	}
	return it.Error()
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
