package web

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/accounts"
	"github.com/mailsink/mailsink/internal/clientaddr"
	"github.com/mailsink/mailsink/store"
)

// cookieName is the session cookie. Its value names the session's account
// and a random id, never the key: base64url(account id) "." base64url(32
// random bytes).
const cookieName = "mailsink_session"

// maxAccountSessions bounds the sessions of one account; past it, the
// oldest go, so that one account's key cannot fill the store.
const maxAccountSessions = 100

// sessions keeps dashboard sessions in the store, where every process
// serving it finds them.
type sessions struct {
	ttl   time.Duration
	store store.Sessions
}

func newSessions(ttl time.Duration, st store.Sessions) *sessions {
	return &sessions{ttl: ttl, store: st}
}

// create returns the cookie value of a new session for the account, opened
// with the key whose digest is key.
func (s *sessions) create(ctx context.Context, accountID string, key [32]byte) (string, error) {
	b := make([]byte, 32)
	rand.Read(b)
	id := base64.RawURLEncoding.EncodeToString(b)
	cookie := base64.RawURLEncoding.EncodeToString([]byte(accountID)) + "." + id
	return cookie, s.store.CreateUISession(ctx, id, store.UISession{AccountID: accountID, KeyDigest: key}, s.ttl, maxAccountSessions)
}

// maxAccountID is the longest account id an accounts file may give, and so
// the longest a cookie may name.
const maxAccountID = 128

// parseCookie returns the account id and session id a cookie value names,
// or false.
func parseCookie(cookie string) (accountID, id string, ok bool) {
	a, id, ok := strings.Cut(cookie, ".")
	if !ok || len(id) != 43 || len(a) > base64.RawURLEncoding.EncodedLen(maxAccountID) {
		return "", "", false
	}
	acc, err := base64.RawURLEncoding.DecodeString(a)
	if err != nil || len(acc) == 0 || len(acc) > maxAccountID {
		return "", "", false
	}
	return string(acc), id, true
}

// session returns the session a cookie value names, and false when it is
// unknown or expired.
func (s *sessions) session(ctx context.Context, cookie string) (store.UISession, bool, error) {
	accountID, id, ok := parseCookie(cookie)
	if !ok {
		return store.UISession{}, false, nil
	}
	return s.store.UISession(ctx, accountID, id)
}

// delete ends the session a cookie value names.
func (s *sessions) delete(ctx context.Context, cookie string) error {
	accountID, id, ok := parseCookie(cookie)
	if !ok {
		return nil
	}
	return s.store.DeleteUISession(ctx, accountID, id)
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
	ctx, cancel := context.WithTimeout(r.Context(), sessionTimeout)
	defer cancel()
	if c, err := r.Cookie(cookieName); err == nil {
		_ = h.sessions.delete(ctx, c.Value) // tidying: it expires anyway
	}
	cookie, err := h.sessions.create(ctx, acc.ID, config.Digest(key))
	if err != nil {
		h.storeFailed(w, "sign in", err)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: cookie, Path: Prefix,
		MaxAge: int(h.cfg.SessionTTL.Seconds()), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"account": map[string]string{"id": acc.ID, "slug": acc.Slug, "name": acc.Name}})
}

// signOut ends the cookie's session and expires the cookie. When the store
// cannot end it, the browser forgets the cookie all the same, and the
// answer says so.
func (h *Handler) signOut(w http.ResponseWriter, r *http.Request) {
	var err error
	if c, cerr := r.Cookie(cookieName); cerr == nil {
		ctx, cancel := context.WithTimeout(r.Context(), sessionTimeout)
		defer cancel()
		err = h.sessions.delete(ctx, c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	if err != nil {
		h.storeFailed(w, "sign out", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// sessionAccount returns the account id of the request's session cookie,
// or answers (401, or 503 when the store cannot tell) and returns "".
func (h *Handler) sessionAccount(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(cookieName); err == nil {
		ctx, cancel := context.WithTimeout(r.Context(), sessionTimeout)
		defer cancel()
		v, ok, err := h.sessions.session(ctx, c.Value)
		if err != nil {
			h.storeFailed(w, "read session", err)
			return ""
		}
		if ok {
			if acc, ok := h.cfg.Accounts.ByDigest(v.KeyDigest); ok && acc.ID == v.AccountID {
				return v.AccountID
			}
			// The key was revoked, or moved to another account; ending
			// the session is tidying only, so a failure is not reported.
			_ = h.sessions.delete(ctx, c.Value)
		}
	}
	writeMessage(w, http.StatusUnauthorized, "no dashboard session: reload the dashboard and sign in")
	return ""
}

// sessionTimeout bounds a session's trip to the store.
const sessionTimeout = 5 * time.Second

// storeFailed answers a session's store error: 503 when the store is
// unavailable, 507 when it is full, else 500, logged.
func (h *Handler) storeFailed(w http.ResponseWriter, what string, err error) {
	switch {
	case store.IsCode(err, store.Unavailable) || errors.Is(err, context.DeadlineExceeded):
		writeMessage(w, http.StatusServiceUnavailable, "store unavailable: retry")
		return
	case store.IsCode(err, store.Full):
		writeMessage(w, http.StatusInsufficientStorage, "the store is full: no session could be made")
		return
	}
	h.cfg.Log.Error("dashboard: "+what, "err", err)
	writeMessage(w, http.StatusInternalServerError, "internal error")
}

// clientAddress is the request's client: the peer, or the address a trusted
// proxy forwarded, as the API counts it for the wrong-key limit.
func clientAddress(r *http.Request) string { return clientaddr.FromRequest(r) }
