package boltv4

import (
	"context"
	"sync"
	"time"

	"github.com/mailsink/mailsink/store"
)

// maxSessions bounds the dashboard sessions kept; past it, the one closest
// to expiry ends.
const maxSessions = 10000

// sessions keeps dashboard sessions in memory: the embedded store serves
// one process, and a restart signs browsers out of the cookie endpoints
// (the page mints a new session when it loads).
type sessions struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[sessionKey]session
}

type sessionKey struct{ accountID, id string }

type session struct {
	store.UISession
	expires time.Time
}

func newSessions(now func() time.Time) *sessions {
	return &sessions{now: now, m: map[sessionKey]session{}}
}

// CreateUISession implements store.Sessions.
func (s *Store) CreateUISession(_ context.Context, id string, sess store.UISession, ttl time.Duration, limit int) error {
	ss := s.sessions
	now := ss.now()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	mine := 0
	for k := range ss.m {
		if k.accountID == sess.AccountID {
			mine++
		}
	}
	if mine >= limit {
		ss.prune(now, sess.AccountID)
	}
	if len(ss.m) >= maxSessions {
		ss.prune(now, "")
	}
	ss.m[sessionKey{sess.AccountID, id}] = session{UISession: sess, expires: now.Add(ttl)}
	return nil
}

// UISession implements store.Sessions.
func (s *Store) UISession(_ context.Context, accountID, id string) (store.UISession, bool, error) {
	ss := s.sessions
	ss.mu.Lock()
	defer ss.mu.Unlock()
	k := sessionKey{accountID, id}
	v, ok := ss.m[k]
	if !ok {
		return store.UISession{}, false, nil
	}
	if !ss.now().Before(v.expires) {
		delete(ss.m, k)
		return store.UISession{}, false, nil
	}
	return v.UISession, true, nil
}

// DeleteUISession implements store.Sessions.
func (s *Store) DeleteUISession(_ context.Context, accountID, id string) error {
	ss := s.sessions
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, sessionKey{accountID, id})
	return nil
}

// prune drops expired sessions and the one closest to expiry, of the
// account with accountID, or of all accounts when it is empty. s.mu is held.
func (s *sessions) prune(now time.Time, accountID string) {
	var oldest sessionKey
	found := false
	for k, v := range s.m {
		switch {
		case !now.Before(v.expires):
			delete(s.m, k)
		case accountID != "" && k.accountID != accountID:
		case !found || v.expires.Before(s.m[oldest].expires):
			oldest, found = k, true
		}
	}
	if found {
		delete(s.m, oldest)
	}
}
