package pebblestore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mailsink/mailsink/store"
)

var _ store.Sessions = (*Store)(nil)

// A dashboard session is kept under the SHA-256 digest of its id, so that
// keys never hold a live session id: 'a' account 'u' sha256(id) -> expiry
// (Unix ms, 8 bytes big-endian) | the digest of the key it signed in with
// (32 bytes). Sessions live as long as the store: on disk they survive a
// restart, in memory they do not.
func sessionKey(accountID, id string) []byte {
	sum := sha256.Sum256([]byte(id))
	return append(accountKey(accountID, partSession, len(sum)), sum[:]...)
}

// CreateUISession implements store.Sessions. The account's expired sessions
// end with it.
func (s *Store) CreateUISession(ctx context.Context, id string, sess store.UISession, ttl time.Duration, limit int) error {
	if err := s.enter(ctx, "create dashboard session"); err != nil {
		return err
	}
	defer s.leave()
	now := time.Now()
	v := binary.BigEndian.AppendUint64(nil, uint64(now.Add(ttl).UnixMilli()))
	v = append(v, sess.KeyDigest[:]...)
	key := sessionKey(sess.AccountID, id)
	_, err := s.change(func(b *pebble.Batch) (int, error) {
		prefix := accountKey(sess.AccountID, partSession, 0)
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
		if err != nil {
			return 0, err
		}
		defer it.Close()
		type live struct {
			key     []byte
			expires uint64
		}
		var kept []live
		for valid := it.First(); valid; valid = it.Next() {
			k, val := it.Key(), it.Value()
			switch {
			case string(k) == string(key):
			case len(val) != 40 || int64(binary.BigEndian.Uint64(val)) <= now.UnixMilli():
				if err := b.Delete(k, nil); err != nil {
					return 0, err
				}
			default:
				kept = append(kept, live{append([]byte(nil), k...), binary.BigEndian.Uint64(val)})
			}
		}
		if err := it.Error(); err != nil {
			return 0, err
		}
		// Past the limit, the sessions closest to expiry end.
		for len(kept) >= max(limit, 1) {
			first := 0
			for i, l := range kept {
				if l.expires < kept[first].expires {
					first = i
				}
			}
			if err := b.Delete(kept[first].key, nil); err != nil {
				return 0, err
			}
			kept = append(kept[:first], kept[first+1:]...)
		}
		return 0, b.Set(key, v, nil)
	})
	return wrap(err, "create dashboard session")
}

// UISession implements store.Sessions.
func (s *Store) UISession(ctx context.Context, accountID, id string) (store.UISession, bool, error) {
	if err := s.enter(ctx, "read dashboard session"); err != nil {
		return store.UISession{}, false, err
	}
	defer s.leave()
	v, err := s.get(sessionKey(accountID, id))
	if err != nil {
		return store.UISession{}, false, wrap(err, "read dashboard session")
	}
	if len(v) != 40 || int64(binary.BigEndian.Uint64(v)) <= time.Now().UnixMilli() {
		return store.UISession{}, false, nil
	}
	sess := store.UISession{AccountID: accountID}
	copy(sess.KeyDigest[:], v[8:])
	return sess, true, nil
}

// DeleteUISession implements store.Sessions.
func (s *Store) DeleteUISession(ctx context.Context, accountID, id string) error {
	if err := s.enter(ctx, "delete dashboard session"); err != nil {
		return err
	}
	defer s.leave()
	_, err := s.change(func(b *pebble.Batch) (int, error) {
		return 0, b.Delete(sessionKey(accountID, id), nil)
	})
	return wrap(err, "delete dashboard session")
}
