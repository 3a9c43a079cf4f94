package web

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mailsink/mailsink/accounts"
	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/clientaddr"
)

// cookieName is the session cookie; it holds a random session id, never
// the key.
const cookieName = "mailsink_session"

// maxSessions bounds the sessions kept in memory, and maxAccountSessions
// those of one account; past either, the oldest go, so that one account's
// key cannot sign everyone else out.
const (
	maxSessions        = 10000
	maxAccountSessions = 100
)

// sessions maps random session ids to account ids, in memory: a restart
// signs every browser out of the cookie endpoints, and the page mints a new
// session when it loads.
type sessions struct {
	ttl time.Duration
	now func() time.Time
	mu  sync.Mutex
	m   map[string]session
}

// session is an account's session, and the digest of the key that opened
// it: each use checks that the key still belongs to the account, so that a
// key removed from the accounts file ends its sessions too.
type session struct {
	accountID string
	key       [32]byte
	expires   time.Time
}

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{ttl: ttl, now: now, m: map[string]session{}}
}

// create returns a new session id for the account, opened with the key
// whose digest is key.
func (s *sessions) create(accountID string, key [32]byte) string {
	b := make([]byte, 32)
	rand.Read(b)
	id := base64.RawURLEncoding.EncodeToString(b)
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	mine := 0
	for _, v := range s.m {
		if v.accountID == accountID {
			mine++
		}
	}
	if mine >= maxAccountSessions {
		s.prune(now, accountID)
	}
	if len(s.m) >= maxSessions {
		s.prune(now, "")
	}
	s.m[id] = session{accountID: accountID, key: key, expires: now.Add(s.ttl)}
	return id
}

// prune drops expired sessions and the one closest to expiry, of the
// account with accountID, or of all accounts when it is empty. s.mu is held.
func (s *sessions) prune(now time.Time, accountID string) {
	var oldest string
	for id, v := range s.m {
		switch {
		case !now.Before(v.expires):
			delete(s.m, id)
		case accountID != "" && v.accountID != accountID:
		case oldest == "" || v.expires.Before(s.m[oldest].expires):
			oldest = id
		}
	}
	if oldest != "" {
		delete(s.m, oldest)
	}
}

// session returns session id, and false when it is unknown or expired.
func (s *sessions) session(id string) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[id]
	if !ok {
		return session{}, false
	}
	if !s.now().Before(v.expires) {
		delete(s.m, id)
		return session{}, false
	}
	return v, true
}

func (s *sessions) delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// signIn mints a session for the account of the request's API key and
// answers that account. The key comes only in a header, which another site
// cannot make a browser send without a CORS preflight that is never
// granted; the session it replaces (the cookie sent along) is ended.
func (h *Handler) signIn(w http.ResponseWriter, r *http.Request) {
	key := accounts.RequestKey(r, false)
	if key == "" {
		writeMessage(w, http.StatusUnauthorized, "missing API key: send Authorization: Bearer <key>")
		return
	}
	acc, ok := h.cfg.Accounts.ByKey(key)
	if allowed, wait := h.cfg.AuthLimiter.Attempt(clientAddress(r), key, ok); !allowed {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds()+0.999)))
		writeMessage(w, http.StatusTooManyRequests, "too many requests with a wrong API key from this address: retry later")
		return
	}
	if !ok {
		writeMessage(w, http.StatusUnauthorized, "invalid API key")
		return
	}
	if c, err := r.Cookie(cookieName); err == nil {
		h.sessions.delete(c.Value)
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: h.sessions.create(acc.ID, config.Digest(key)), Path: Prefix,
		MaxAge: int(h.cfg.SessionTTL.Seconds()), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"account": map[string]string{"id": acc.ID, "slug": acc.Slug, "name": acc.Name}})
}

// signOut ends the cookie's session and expires the cookie.
func (h *Handler) signOut(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(cookieName); err == nil {
		h.sessions.delete(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

// sessionAccount returns the account id of the request's session cookie,
// or answers 401 and returns "".
func (h *Handler) sessionAccount(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(cookieName); err == nil {
		if v, ok := h.sessions.session(c.Value); ok {
			if acc, ok := h.cfg.Accounts.ByDigest(v.key); ok && acc.ID == v.accountID {
				return v.accountID
			}
			h.sessions.delete(c.Value) // the key was revoked, or moved to another account
		}
	}
	writeMessage(w, http.StatusUnauthorized, "no dashboard session: reload the dashboard and sign in")
	return ""
}

// clientAddress is the request's client: the peer, or the address a trusted
// proxy forwarded, as the API counts it for the wrong-key limit.
func clientAddress(r *http.Request) string { return clientaddr.FromRequest(r) }
