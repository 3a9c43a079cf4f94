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

// A browser holds one session cookie per account, so that tabs signed in
// to different accounts keep working side by side: the cookie of account
// A is named cookiePrefix + segment(A), and the endpoints that read with
// it name the account in their path, /ui/a/<segment>/. Its value names
// the account and a random id, never the key: segment(A) "." base64url(32
// random bytes).
const cookiePrefix = "mailsink_session_"

// maxAccountSessions bounds the sessions of one account; past it, the
// oldest go, so that one account's key cannot fill the store.
const maxAccountSessions = 100

// maxAccountID is the longest account id an accounts file may give
// (config.ParseAccounts), and so the longest a cookie or a path may name.
const maxAccountID = 128

// segment is an account id as it appears in cookie names and paths.
func segment(accountID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(accountID))
}

// parseSegment returns the account id a segment names, or false.
func parseSegment(seg string) (string, bool) {
	if len(seg) > base64.RawURLEncoding.EncodedLen(maxAccountID) {
		return "", false
	}
	acc, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil || len(acc) == 0 {
		return "", false
	}
	return string(acc), true
}

// accountBase is the path under which the account's session reads.
func accountBase(accountID string) string { return Prefix + "a/" + segment(accountID) + "/" }

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
	cookie := segment(accountID) + "." + id
	return cookie, s.store.CreateUISession(ctx, id, store.UISession{AccountID: accountID, KeyDigest: key}, s.ttl, maxAccountSessions)
}

// parseCookie returns the account id and session id a cookie value names,
// or false.
func parseCookie(cookie string) (accountID, id string, ok bool) {
	a, id, ok := strings.Cut(cookie, ".")
	if !ok || len(id) != 43 {
		return "", "", false
	}
	accountID, ok = parseSegment(a)
	return accountID, id, ok
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

// accountCookie returns the value of the request's session cookie for the
// account, or "".
func accountCookie(r *http.Request, accountID string) string {
	c, err := r.Cookie(cookiePrefix + segment(accountID))
	if err != nil {
		return ""
	}
	if a, _, ok := parseCookie(c.Value); !ok || a != accountID {
		return ""
	}
	return c.Value
}

// sessionCookie is the account's session cookie with value; a negative
// maxAge expires it.
func sessionCookie(r *http.Request, accountID, value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: cookiePrefix + segment(accountID), Value: value, Path: Prefix, MaxAge: maxAge,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	}
}

// signIn mints a session for the account of the request's API key and
// answers that account and the path its session reads under. The key
// comes only in a header, which another site cannot make a browser send
// without a CORS preflight that is never granted; the account's session
// this browser had (its cookie, sent along) is ended, and the new cookie
// takes its place in every tab of the account.
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
	if old := accountCookie(r, acc.ID); old != "" {
		_ = h.sessions.delete(ctx, old) // tidying: it expires anyway
	}
	cookie, err := h.sessions.create(ctx, acc.ID, config.Digest(key))
	if err != nil {
		h.storeFailed(w, writeMessage, "sign in", err)
		return
	}
	http.SetCookie(w, sessionCookie(r, acc.ID, cookie, int(h.cfg.SessionTTL.Seconds())))
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"account": map[string]string{"id": acc.ID, "slug": acc.Slug, "name": acc.Name},
		"base":    accountBase(acc.ID),
	})
}

// checkSession answers 204 when the request carries a working session of
// the account its path names, else 401 (503 when the store cannot tell).
// The page asks before it shows a preview or a download, and signs in
// again when the session was lost (a restart on a store that keeps none,
// an expiry).
func (h *Handler) checkSession(w http.ResponseWriter, r *http.Request) {
	if h.sessionAccount(w, r, writeMessage) != "" {
		w.WriteHeader(http.StatusNoContent)
	}
}

// signOut ends the session of the account the path names and expires its
// cookie. When the store cannot end it, the browser forgets the cookie all
// the same, and the answer says so.
func (h *Handler) signOut(w http.ResponseWriter, r *http.Request) {
	accountID, ok := parseSegment(r.PathValue("account"))
	if !ok {
		writeMessage(w, http.StatusNotFound, "not found")
		return
	}
	var err error
	if c := accountCookie(r, accountID); c != "" {
		ctx, cancel := context.WithTimeout(r.Context(), sessionTimeout)
		defer cancel()
		err = h.sessions.delete(ctx, c)
	}
	http.SetCookie(w, sessionCookie(r, accountID, "", -1))
	if err != nil {
		h.storeFailed(w, writeMessage, "sign out", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// sessionAccount returns the account id that the request's path names
// when the request carries a working session cookie of that account, or
// answers with fail (401, or 503 when the store cannot tell) and returns
// "".
func (h *Handler) sessionAccount(w http.ResponseWriter, r *http.Request, fail failure) string {
	accountID, ok := parseSegment(r.PathValue("account"))
	if ok {
		if c := accountCookie(r, accountID); c != "" {
			ctx, cancel := context.WithTimeout(r.Context(), sessionTimeout)
			defer cancel()
			v, found, err := h.sessions.session(ctx, c)
			if err != nil {
				h.storeFailed(w, fail, "read session", err)
				return ""
			}
			if found {
				if acc, ok := h.cfg.Accounts.ByDigest(v.KeyDigest); ok && acc.ID == v.AccountID {
					return v.AccountID
				}
				// The key was revoked, or moved to another account; ending
				// the session is tidying only, so a failure is not reported.
				_ = h.sessions.delete(ctx, c)
			}
		}
	}
	fail(w, http.StatusUnauthorized, "no dashboard session: reload the dashboard and sign in")
	return ""
}

// failure answers an error with a status and a message for people: as the
// API's JSON envelope, or as a page the preview frame shows.
type failure func(w http.ResponseWriter, status int, msg string)

// sessionTimeout bounds a session's trip to the store.
const sessionTimeout = 5 * time.Second

// storeFailed answers a session's store error with answer: 503 when the
// store is unavailable, 507 when it is full, else 500, logged.
func (h *Handler) storeFailed(w http.ResponseWriter, answer failure, what string, err error) {
	switch {
	case store.IsCode(err, store.Unavailable) || errors.Is(err, context.DeadlineExceeded):
		answer(w, http.StatusServiceUnavailable, "store unavailable: retry")
		return
	case store.IsCode(err, store.Full):
		answer(w, http.StatusInsufficientStorage, "the store is full: no session could be made")
		return
	}
	h.cfg.Log.Error("dashboard: "+what, "err", err)
	answer(w, http.StatusInternalServerError, "internal error")
}

// clientAddress is the request's client: the peer, or the address a trusted
// proxy forwarded, as the API counts it for the wrong-key limit.
func clientAddress(r *http.Request) string { return clientaddr.FromRequest(r) }
