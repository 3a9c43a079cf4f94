// Package httpapi serves mailsink's HTTP interface: the /v1 email API of
// the OpenAPI document, raw inbound, health and readiness. Auth, validation and the JSON
// envelopes live here; error codes become HTTP statuses in one table.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/mux"

	"github.com/mailsink/mailsink/api"
	"github.com/mailsink/mailsink/internal/accounts"
	"github.com/mailsink/mailsink/internal/authlimit"
	"github.com/mailsink/mailsink/internal/bodies"
	"github.com/mailsink/mailsink/internal/checks"
	"github.com/mailsink/mailsink/internal/clientaddr"
	"github.com/mailsink/mailsink/internal/faults"
	"github.com/mailsink/mailsink/internal/gate"
	"github.com/mailsink/mailsink/internal/held"
	"github.com/mailsink/mailsink/internal/inbound"
	"github.com/mailsink/mailsink/internal/ingest"
	"github.com/mailsink/mailsink/internal/metrics"
	"github.com/mailsink/mailsink/internal/relay"
	"github.com/mailsink/mailsink/internal/search"
	"github.com/mailsink/mailsink/internal/webhooks"
	"github.com/mailsink/mailsink/store"
)

// Config holds the HTTP API's limits.
type Config struct {
	// Bodies reads emails' content for the detail and the other readers
	// of one email, under the read budget.
	Bodies *bodies.Service
	// Search answers the list, count and bulk requests that have a q, and
	// the stats; nil refuses q with 409 (tests that need no search).
	Search *search.Service
	// MaxRecipients bounds the envelope recipients a provider webhook may
	// name (ingest bounds every delivery too; this refuses before the
	// lookups).
	MaxRecipients int
	// MaxMessageBytes bounds /v1/inbound bodies and create's raw.
	MaxMessageBytes int64
	// MaxJSONBytes bounds PATCH bodies.
	MaxJSONBytes int64
	// StoreTimeout bounds one request's store calls.
	StoreTimeout time.Duration
	// MaxHeldPerAccount bounds the requests of one account held open at
	// once: list requests with wait, and event streams. More answer 429.
	// It makes the API's own Limiter when Held is nil.
	MaxHeldPerAccount int
	// Held, when not nil, is the Limiter of held requests that the API
	// shares with the other doors that hold requests (MCP's waits), so
	// that one budget per account bounds them all.
	Held *held.Limiter
	// SSEHeartbeat is how often an idle event stream sends a comment, so
	// that proxies keep it open.
	SSEHeartbeat time.Duration
	// SSEWriteTimeout bounds one write to an event stream.
	SSEWriteTimeout time.Duration
	// Writes, when not nil, tells whether store writes succeed, for
	// /readyz/writes (metrics.Writes.State).
	Writes func() (ok bool, reason string, since time.Time)
	// LargeGate, when not nil, gives turns to request bodies past their
	// first MiB (shared with SMTP's large messages); nil reads them at once.
	LargeGate *gate.Gate
	// BodyBudget, when not nil, bounds the memory that request bodies'
	// first MiB hold while they are read and used, in all, per client
	// address and per account (past their first MiB, LargeGate bounds
	// them); nil reads them at once.
	BodyBudget *gate.Budget
	// AuthLimiter, when not nil, counts wrong API keys per client address;
	// an address over its limit is answered 429 for every key that has not
	// worked from it before.
	AuthLimiter *authlimit.Limiter
	// Metrics, when not nil, counts requests by route; MetricsHandler, when
	// not nil, is served at /metrics.
	Metrics        *metrics.Metrics
	MetricsHandler http.Handler
	// Dashboard, when not nil, serves the page at / and everything under
	// /ui/ (the web package); it sets its own security headers.
	Dashboard http.Handler
	// Certificate, when not nil, returns the PEM certificate (chain) that
	// the TLS listeners present, served without a key at
	// /tls/certificate.pem so that clients elsewhere can trust it.
	Certificate func() []byte
	// Faults, when not nil, serves /v1/faults; without it those routes
	// answer 404.
	Faults *faults.Injector
	// Webhooks, when not nil, serves /v1/webhooks.
	Webhooks *webhooks.Service
	// Checks, when not nil, serves /v1/emails/{emailId}/checks/{check};
	// without it those routes answer 404.
	Checks *checks.Service
	// MCP, when not nil, serves /mcp, the Model Context Protocol endpoint
	// (package mcpserver), for the account of the request's API key.
	MCP MCP
	// Relay, when not nil, serves the release of emails to accounts'
	// relays (POST /v1/emails/{emailId}/release, POST /v1/emails/release).
	Relay *relay.Service
	// SNS verifies the SNS messages of /v1/inbound/ses and confirms their
	// subscriptions; nil uses inbound.NewSNS(nil, nil).
	SNS *inbound.SNS
}

// MCP serves the MCP endpoint for one account.
type MCP interface {
	// ServeAccount serves a request whose API key is acc's.
	ServeAccount(w http.ResponseWriter, r *http.Request, acc *store.Account)
}

// API is the HTTP handler of mailsink.
type API struct {
	cfg      Config
	store    store.Store
	accounts *accounts.Registry
	ingest   *ingest.Service
	sns      *inbound.SNS
	log      *slog.Logger
	now      func() time.Time
	handler  http.Handler
	held     *held.Limiter
	// waiting and streams count the held requests of each kind.
	waiting, streams atomic.Int64
	// buffers holds *[]byte for the JSON answers written by hand (json.go).
	buffers sync.Pool
	// openAPIDocument is api/openapi.yaml as JSON, served at /v1/openapi.json.
	openAPIDocument []byte
}

// StopHeld ends the requests held open (list with wait answers what it has,
// event streams end), now and from now on. Call it before shutting the
// server down: the shutdown then waits only for ordinary requests.
func (a *API) StopHeld() { a.held.Stop() }

// New returns the API over its dependencies. Every limit and timeout of cfg
// must be set: their defaults live in package config.
func New(cfg Config, s store.Store, reg *accounts.Registry, ing *ingest.Service, log *slog.Logger, now func() time.Time) *API {
	a := &API{cfg: cfg, store: s, accounts: reg, ingest: ing, log: log, now: now, held: cfg.Held,
		openAPIDocument: api.OpenAPIJSON()}
	if a.held == nil {
		a.held = held.NewLimiter(cfg.MaxHeldPerAccount)
	}
	a.sns = cfg.SNS
	if a.sns == nil {
		a.sns = inbound.NewSNS(nil, nil)
	}
	a.handler = a.routes()
	return a
}

// ServeHTTP serves one request.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.handler.ServeHTTP(w, r) }

func (a *API) routes() http.Handler {
	r := mux.NewRouter()
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeMessage(w, http.StatusNotFound, "not found")
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeMessage(w, http.StatusMethodNotAllowed, "method not allowed")
	})
	r.HandleFunc("/healthz", a.healthz).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/readyz", a.readyz).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/readyz/writes", a.writesReady).Methods(http.MethodGet, http.MethodHead)
	if a.cfg.MetricsHandler != nil {
		r.Handle("/metrics", a.cfg.MetricsHandler).Methods(http.MethodGet, http.MethodHead)
	}
	r.HandleFunc("/tls/certificate.pem", a.certificate).Methods(http.MethodGet, http.MethodHead)
	r.Use(noteRoute)

	// The /v1 routes sit on the root router (not a subrouter) so that a
	// known path with the wrong method answers 405: gorilla/mux loses the
	// method mismatch inside subrouters.
	v1 := func(path, method string, h http.HandlerFunc) {
		r.Handle("/v1"+path, a.authenticate(h, false)).Methods(method)
	}
	// Providers can only put credentials in the URL: the inbound routes
	// take the key as a Basic auth password too.
	in := func(path string, h http.HandlerFunc) {
		r.Handle("/v1"+path, a.authenticate(h, true)).Methods(http.MethodPost)
	}
	r.HandleFunc("/v1/openapi.json", a.openAPI).Methods(http.MethodGet, http.MethodHead)
	v1("/emails", http.MethodGet, a.listEmails)
	v1("/emails", http.MethodPost, a.createEmail)
	v1("/emails", http.MethodDelete, a.bulkDelete)
	// Before /emails/{emailId}, which would take "count" and "release"
	// as ids.
	v1("/emails/count", http.MethodGet, a.countEmails)
	v1("/emails/stats", http.MethodGet, a.emailStats)
	a.releaseRoutes(v1)
	v1("/emails/{emailId}", http.MethodGet, a.getEmail)
	v1("/emails/{emailId}", http.MethodPatch, a.updateEmail)
	v1("/emails/{emailId}", http.MethodDelete, a.deleteEmail)
	v1("/emails/{emailId}/raw", http.MethodGet, a.rawEmail)
	v1("/emails/{emailId}/links", http.MethodGet, a.emailLinks)
	v1("/emails/{emailId}/codes", http.MethodGet, a.emailCodes)
	v1("/emails/{emailId}/transcript", http.MethodGet, a.emailTranscript)
	v1("/emails/{emailId}/attachments/{index}", http.MethodGet, a.attachment)
	v1("/emails/{emailId}/checks/{check}", http.MethodGet, a.emailCheck)
	v1("/events", http.MethodGet, a.events)
	in("/inbound", a.inbound)
	in("/inbound/mailgun", a.inboundMailgun)
	// Mailgun sends the raw MIME only to a URL ending in "mime".
	in("/inbound/mailgun/mime", a.inboundMailgun)
	in("/inbound/sendgrid", a.inboundSendGrid)
	in("/inbound/postmark", a.inboundPostmark)
	in("/inbound/ses", a.inboundSES)
	if a.cfg.Faults != nil {
		v1("/faults", http.MethodPost, a.createFault)
		v1("/faults", http.MethodGet, a.listFaults)
		v1("/faults", http.MethodDelete, a.deleteFaults)
		v1("/faults/{faultId}", http.MethodDelete, a.deleteFault)
	}
	if a.cfg.MCP != nil {
		// Every method: the MCP server answers those it does not serve.
		r.Handle("/mcp", a.authenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a.cfg.MCP.ServeAccount(w, r, accountOf(r))
		}), false))
	}
	if a.cfg.Dashboard != nil {
		r.Handle("/", a.cfg.Dashboard)
		r.PathPrefix("/ui/").Handler(a.cfg.Dashboard)
	}
	a.webhookRoutes(v1)
	return a.common(r)
}

// requestInfo is what the middleware learns about a request on its way to
// the handler: the template of the route that matched (noteRoute, for the
// metrics) and the account of its API key (authenticate). common puts it
// in the request's context once, so that the later steps fill it in rather
// than copy the request for each value (each copy is an allocation of a few
// hundred bytes).
type requestInfo struct {
	route   string
	account *store.Account
}

type requestInfoKey struct{}

func infoOf(r *http.Request) *requestInfo {
	info, _ := r.Context().Value(requestInfoKey{}).(*requestInfo)
	return info
}

// noteRoute records the template of the route that matched.
func noteRoute(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if info := infoOf(r); info != nil {
			if t, err := mux.CurrentRoute(r).GetPathTemplate(); err == nil {
				info.route = t
			}
		}
		next.ServeHTTP(w, r)
	})
}

// common sets the headers every answer carries (the dashboard replaces the
// Content-Security-Policy and frame options with its own), counts the
// request in the metrics, and recovers from panics, so that a bug answers
// 500 instead of dropping the connection.
func (a *API) common(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := &requestInfo{route: "unmatched"}
		r = r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info))
		if a.cfg.Metrics != nil {
			start := time.Now()
			rec := &statusRecorder{ResponseWriter: w}
			w = rec
			defer func() {
				if rec.status == 0 {
					rec.status = http.StatusOK
				}
				a.cfg.Metrics.HTTPRequest(info.route, r.Method, rec.status, time.Since(start))
			}()
		}
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				a.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", v)
				writeMessage(w, http.StatusInternalServerError, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// authenticate finds the account of the request's API key, from
// "Authorization: Bearer KEY" or "x-api-key: KEY" (and, when basic is
// set, Basic auth whose password is the key, any user name), or answers
// 401.
func (a *API) authenticate(next http.Handler, basic bool) http.Handler {
	missing := "missing API key: send Authorization: Bearer <key> or x-api-key: <key>"
	if basic {
		missing = "missing API key: send Authorization: Bearer <key>, x-api-key: <key>, or the key as a Basic auth password (https://any:<key>@host/...)"
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := accounts.RequestKey(r, basic)
		if key == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mailsink"`)
			if basic {
				w.Header().Add("WWW-Authenticate", `Basic realm="mailsink"`)
			}
			writeMessage(w, http.StatusUnauthorized, missing)
			return
		}
		acc, ok := a.accounts.ByKey(key)
		// Past the limit an address gets 429 for every key but those that
		// already worked from it, right or wrong alike.
		if allowed, wait := a.cfg.AuthLimiter.Attempt(clientAddress(r), key, ok); !allowed {
			w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds()+0.999)))
			writeMessage(w, http.StatusTooManyRequests, "too many requests with a wrong API key from this address: retry later")
			return
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mailsink", error="invalid_token"`)
			writeMessage(w, http.StatusUnauthorized, "invalid API key")
			return
		}
		if info := infoOf(r); info != nil {
			info.account = acc
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, &requestInfo{account: acc})))
	})
}

// clientAddress is the request's client IP: the peer's, or the address a
// trusted proxy forwarded (ServerConfig.TrustedProxies).
func clientAddress(r *http.Request) string { return clientaddr.FromRequest(r) }

func accountOf(r *http.Request) *store.Account {
	return infoOf(r).account
}

func (a *API) storeContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), a.cfg.StoreTimeout)
}

// readyTimeout bounds /readyz's store check.
const readyTimeout = time.Second

func (a *API) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

// readyz answers 200 when this replica can serve reads: the store answers
// (for a Redis Cluster, at least one master does; see redisstore's Ping)
// within readyTimeout, so a probe never hangs on one slow shard.
func (a *API) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := a.store.Ping(ctx); err != nil {
		a.log.Warn("not ready: store does not answer", "err", err)
		writeMessage(w, http.StatusServiceUnavailable, "store unavailable")
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

// writesReady answers whether the store takes writes, as far as the last
// write tells: 503 while writes fail because the store is full or
// unavailable. /readyz stays about reads on purpose: a replica whose store
// is full must stay in service, so that people can delete mail to make room.
func (a *API) writesReady(w http.ResponseWriter, _ *http.Request) {
	if a.cfg.Writes != nil {
		if ok, reason, since := a.cfg.Writes(); !ok {
			writeMessage(w, http.StatusServiceUnavailable, fmt.Sprintf("writes are failing: %s (since %s)", reason, since.UTC().Format(time.RFC3339)))
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

func (a *API) listEmails(w http.ResponseWriter, r *http.Request) {
	v := newValidationError()
	query := r.URL.Query()
	q, wait := parseListQuery(query, v)
	sq := parseSearch(query, v)
	if !v.empty() {
		writeValidation(w, v)
		return
	}
	q.AccountID = accountOf(r).ID
	var emails []*store.Email
	var ok bool
	if wait > 0 {
		emails, ok = a.waitForEmails(w, r, q, sq, wait)
	} else {
		emails, ok = a.list(w, r, q, sq)
	}
	if !ok {
		return
	}
	a.writeList(w, http.StatusOK, emails)
}

// countEmails answers {"count": N}, the number of the account's emails the
// list filters and q select; limit, offset and wait are refused.
func (a *API) countEmails(w http.ResponseWriter, r *http.Request) {
	v := newValidationError()
	query := r.URL.Query()
	q, _ := parseListQuery(query, v)
	sq := parseSearch(query, v)
	for _, name := range []string{"limit", "offset", "wait"} {
		if query.Has(name) {
			v.field(name, "is not a filter of count")
		}
	}
	if !v.empty() {
		writeValidation(w, v)
		return
	}
	q.AccountID = accountOf(r).ID
	ctx, cancel := a.storeContext(r)
	defer cancel()
	var n int64
	var err error
	if sq.Empty() {
		n, err = a.store.CountEmails(ctx, q)
	} else if err = a.searching(); err == nil {
		n, err = a.cfg.Search.Count(ctx, q, sq)
	}
	if err != nil {
		writeError(w, r, a.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"count": n})
}

// searching returns nil when the API has a search index, else the 409 of
// a deployment without one.
func (a *API) searching() error {
	if a.cfg.Search == nil {
		return store.Errorf(store.Conflict, "search (q) is not available in this deployment")
	}
	return nil
}

// statsJSON is the answer of GET /v1/emails/stats.
type statsJSON struct {
	Total    int64            `json:"total"`
	Unread   int64            `json:"unread"`
	Statuses map[string]int64 `json:"statuses"`
	Labels   []labelStatsJSON `json:"labels"`
}

type labelStatsJSON struct {
	Name   string `json:"name"`
	Total  int64  `json:"total"`
	Unread int64  `json:"unread"`
}

// emailStats answers the account's counts: all, unread, by status and by
// label (labels sorted by name), for the dashboard's sidebar and anyone.
func (a *API) emailStats(w http.ResponseWriter, r *http.Request) {
	if len(r.URL.Query()) > 0 {
		v := newValidationError()
		v.form("stats takes no parameters")
		writeValidation(w, v)
		return
	}
	if err := a.searching(); err != nil {
		writeError(w, r, a.log, err)
		return
	}
	ctx, cancel := a.storeContext(r)
	defer cancel()
	s, err := a.cfg.Search.Stats(ctx, accountOf(r).ID)
	if err != nil {
		writeError(w, r, a.log, err)
		return
	}
	out := statsJSON{Total: s.Total, Unread: s.Unread, Statuses: map[string]int64{}, Labels: []labelStatsJSON{}}
	for _, st := range []store.Status{store.StatusReceived, store.StatusProcessed, store.StatusArchived} {
		out.Statuses[string(st)] = s.Statuses[st]
	}
	for name, l := range s.Labels {
		out.Labels = append(out.Labels, labelStatsJSON{Name: name, Total: l.Total, Unread: l.Unread})
	}
	slices.SortFunc(out.Labels, func(x, y labelStatsJSON) int { return strings.Compare(x.Name, y.Name) })
	writeJSON(w, http.StatusOK, out)
}

func (a *API) createEmail(w http.ResponseWriter, r *http.Request) {
	// JSON escaping makes raw longer in the body: twice its length covers
	// every escape but those of control characters (\u0000), which mail
	// does not contain; the parts together are then bounded by createSize.
	obj, v, release, ok := a.readObject(w, r, 2*a.cfg.MaxMessageBytes+(1<<20))
	if !ok {
		return
	}
	defer release()
	in := ingest.NewEmail{
		AccountID:      accountOf(r).ID,
		Recipient:      obj.address("recipient"),
		Sender:         obj.address("sender"),
		IdempotencyKey: idempotencyKey(r, v),
	}
	if s, ok := obj.str("subject", false, true, maxSubject); ok {
		in.Subject = &ingest.Optional{Value: s}
	}
	if s, ok := obj.str("text", false, true, 0); ok {
		in.Text = &ingest.Optional{Value: s}
	}
	if s, ok := obj.str("html", false, true, 0); ok {
		in.HTML = &ingest.Optional{Value: s}
	}
	if s, ok := obj.str("raw", false, false, 0); ok {
		in.Raw = []byte(*s)
	}
	if h, ok := obj.headers("headers"); ok {
		in.Headers = h
	}
	if t, ok := obj.time("receivedAt"); ok {
		in.ReceivedAt = t
	}
	if !v.empty() {
		writeValidation(w, v)
		return
	}
	if n := createSize(in); n > a.cfg.MaxMessageBytes {
		writeError(w, r, a.log, store.Errorf(store.TooLarge,
			"raw, text, html and headers together are %d bytes, over the limit of %d", n, a.cfg.MaxMessageBytes))
		return
	}
	ctx, cancel := a.storeContext(r)
	defer cancel()
	e, err := a.ingest.Create(ctx, in)
	if err != nil {
		writeError(w, r, a.log, err)
		return
	}
	a.writeItem(w, http.StatusCreated, e)
}

// createSize is what a create request puts into the message: raw, text,
// html and headers together, bounded like a message so that a composed raw
// cannot grow past the limit that a given raw has.
func createSize(in ingest.NewEmail) int64 {
	n := int64(len(in.Raw))
	for _, o := range []*ingest.Optional{in.Text, in.HTML, in.Subject} {
		if o != nil && o.Value != nil {
			n += int64(len(*o.Value))
		}
	}
	for k, v := range in.Headers {
		n += int64(len(k) + len(v))
	}
	return n
}

// emailID validates the path's email id; a bad one is answered with 400.
func emailID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := mux.Vars(r)["emailId"]
	if !store.ValidID(id) {
		v := newValidationError()
		v.field("emailId", "must be a UUID like 0190b6d2-7c3e-7a1b-8c2d-1234567890ab")
		writeValidation(w, v)
		return "", false
	}
	return store.NormalizeID(id), true
}

func (a *API) updateEmail(w http.ResponseWriter, r *http.Request) {
	id, ok := emailID(w, r)
	if !ok {
		return
	}
	obj, v, release, ok := a.readObject(w, r, a.cfg.MaxJSONBytes)
	if !ok {
		return
	}
	defer release()
	u := store.Update{UpdatedAt: a.now().UTC().Truncate(time.Millisecond)}
	if l, ok := obj.labels("labels"); ok {
		u.Labels = l
	}
	if s, ok := obj.str("notes", false, true, maxNotes); ok {
		u.Notes = &store.Nullable{Value: s}
	}
	if s, ok := obj.str("subject", false, true, maxSubject); ok {
		u.Subject = &store.Nullable{Value: s}
	}
	if s, ok := obj.str("status", false, false, 0); ok {
		if st := checkStatus(*s, "status", v); st != "" {
			u.Status = &st
		}
	}
	if read, ok := obj.boolean("read"); ok {
		u.Read = &read
	}
	if !v.empty() {
		writeValidation(w, v)
		return
	}
	ctx, cancel := a.storeContext(r)
	defer cancel()
	e, err := a.store.UpdateEmail(ctx, accountOf(r).ID, id, u)
	if err != nil {
		writeError(w, r, a.log, err)
		return
	}
	a.writeItem(w, http.StatusOK, e)
}

func (a *API) deleteEmail(w http.ResponseWriter, r *http.Request) {
	id, ok := emailID(w, r)
	if !ok {
		return
	}
	ctx, cancel := a.storeContext(r)
	defer cancel()
	if err := a.store.DeleteEmail(ctx, accountOf(r).ID, id); err != nil {
		writeError(w, r, a.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// inbound stores a raw RFC 5322 message for the key's account, one email
// per envelope recipient.
func (a *API) inbound(w http.ResponseWriter, r *http.Request) {
	raw, release, ok := a.readBody(w, r, a.cfg.MaxMessageBytes)
	if !ok {
		return
	}
	defer release()
	v := newValidationError()
	if len(raw) == 0 {
		v.form("request body is required: send the raw RFC 5322 message")
		writeValidation(w, v)
		return
	}
	acc := accountOf(r)
	env := ingest.Envelope{
		Sender:         strings.TrimSpace(r.Header.Get("X-Envelope-From")),
		IdempotencyKey: idempotencyKey(r, v),
		Caller:         acc.ID,
	}
	if env.Sender != "" && !store.ValidAddress(env.Sender) {
		v.field("X-Envelope-From", "must be a valid email address")
	}
	if to := r.Header.Values("X-Envelope-To"); len(to) > 0 {
		for _, addr := range ingest.SplitAddressList(strings.Join(to, ",")) {
			if !store.ValidAddress(addr) {
				v.field("X-Envelope-To", "must be a comma-separated list of valid email addresses")
				break
			}
			env.Recipients = append(env.Recipients, ingest.Recipient{Address: addr, Account: acc})
		}
	} else {
		env.HeaderAccount = acc // recipients from the To and Cc headers
	}
	if !v.empty() {
		writeValidation(w, v)
		return
	}
	ctx, cancel := a.storeContext(r)
	defer cancel()
	emails, err := a.ingest.Deliver(ctx, raw, env)
	if err != nil {
		writeError(w, r, a.log, err)
		return
	}
	a.writeList(w, http.StatusCreated, emails)
}

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 255

// idempotencyKey reads the Idempotency-Key header: 1 to 255 printable ASCII
// characters, or absent.
func idempotencyKey(r *http.Request, v *validationError) string {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return ""
	}
	ok := len(key) <= maxIdempotencyKey
	for i := 0; ok && i < len(key); i++ {
		ok = key[i] >= ' ' && key[i] <= '~'
	}
	if !ok {
		v.field("Idempotency-Key", fmt.Sprintf("must be 1 to %d printable ASCII characters", maxIdempotencyKey))
		return ""
	}
	return key
}

// readObject reads a JSON object body of at most limit bytes, with the
// validation error its fields are checked into; it reports false when it
// has answered. The caller calls release once the request is done with the
// body (see readBody).
func (a *API) readObject(w http.ResponseWriter, r *http.Request, limit int64) (_ *object, _ *validationError, release func(), _ bool) {
	body, release, ok := a.readBody(w, r, limit)
	if !ok {
		return nil, nil, nil, false
	}
	v := newValidationError()
	obj, ok := parseObject(body, v)
	if !ok {
		release()
		writeValidation(w, v)
		return nil, nil, nil, false
	}
	return obj, v, release, true
}

// largeBody is how much of a request body is read before the request needs
// a turn of the large-transfer gate, as an SMTP message does.
const largeBody = 1 << 20

// maxLargeWait bounds how long a request body waits for a turn of the
// large-transfer gate before it is answered 429.
const maxLargeWait = time.Minute

// maxBudgetWait bounds how long a request body waits for room in
// Config.BodyBudget before it is answered 429: room is short only when a
// client or an account holds many bodies at once.
const maxBudgetWait = 10 * time.Second

// readBody reads the request body up to limit bytes; a larger body is
// answered with 413, a broken one with 400. Its first MiB is read only with
// room in Config.BodyBudget, and past that the body is read only during a
// turn of Config.LargeGate; both are held until the caller calls release
// (after storing), so concurrent requests cannot multiply into gigabytes. A
// request that cannot get room or a turn in time is answered 429.
func (a *API) readBody(w http.ResponseWriter, r *http.Request, limit int64) (_ []byte, release func(), _ bool) {
	body, release, status := a.readBodyAs(w, r, limit, 0)
	return body, release, status == 0
}

// bodyTooLarge is the answer to a request body over limit bytes; it names
// the limit, as create's answer for a too large email does.
func bodyTooLarge(limit int64) string {
	return fmt.Sprintf("request body too large: over the limit of %d bytes", limit)
}

// readBodyAs is readBody answering a body too large or broken with refuse
// instead of 413 and 400, and one that found no room in time with 503
// instead of 429, when refuse is not 0 (a provider's status that stops its
// retries). It returns the status it answered, or 0 when it read the body.
func (a *API) readBodyAs(w http.ResponseWriter, r *http.Request, limit int64, refuse int) (_ []byte, release func(), status int) {
	release = func() {}
	// busy answers a body that found no room in time: 429, or for a
	// provider 503, the status every provider retries.
	tooLarge, broken, busy := http.StatusRequestEntityTooLarge, http.StatusBadRequest, http.StatusTooManyRequests
	if refuse != 0 {
		tooLarge, broken, busy = refuse, refuse, http.StatusServiceUnavailable
	}
	if r.ContentLength > limit {
		writeRefusal(w, tooLarge, bodyTooLarge(limit))
		return nil, nil, tooLarge
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	first := min(limit, largeBody)
	if r.ContentLength >= 0 && r.ContentLength < first {
		first = r.ContentLength
	}
	bucket := clientaddr.Bucket(clientAddress(r))
	if a.cfg.BodyBudget != nil {
		keys := []string{"address\x00" + bucket}
		if acc := accountOf(r); acc != nil {
			keys = append(keys, "account\x00"+acc.ID)
		}
		ctx, cancel := context.WithTimeout(r.Context(), maxBudgetWait)
		rel, err := a.cfg.BodyBudget.Acquire(ctx, first+1, keys...)
		cancel()
		if err != nil {
			w.Header().Set("Retry-After", "1")
			writeMessage(w, busy, "too many request bodies being read at once (from this address, for this account or in all): try again later")
			return nil, nil, busy
		}
		release = rel
	}
	buf := make([]byte, 0, first+1)
	buf, err := readFull(body, buf, first+1)
	more := err == nil && int64(len(buf)) > first
	var src io.Reader = body
	if more && a.cfg.LargeGate != nil {
		// A client that gave up is not noticed while its body is unread:
		// the wait is bounded so that it cannot hold a place for long.
		ctx, cancel := context.WithTimeout(r.Context(), maxLargeWait)
		rel, gateErr := a.cfg.LargeGate.Acquire(ctx, bucket)
		cancel()
		if gateErr != nil {
			release()
			w.Header().Set("Retry-After", "5")
			writeMessage(w, busy, "too many large requests at once (from this address or in all): try again later")
			return nil, nil, busy
		}
		budgetRel := release
		release = func() { rel(); budgetRel() }
		// Holding a turn, the body must keep the gate's data-rate floor.
		rc := http.NewResponseController(w)
		defer rc.SetReadDeadline(time.Time{})
		src = &rateFloor{r: body, rc: rc, start: time.Now()}
	}
	if more {
		// One buffer for the whole body when its length is announced.
		if r.ContentLength > int64(len(buf)) {
			buf = slices.Grow(buf, int(r.ContentLength)+1-len(buf))
		}
		buf, err = readFull(src, buf, limit+1)
	}
	if err != nil {
		release()
		var maxBytes *http.MaxBytesError
		if errors.As(err, &maxBytes) {
			writeRefusal(w, tooLarge, bodyTooLarge(limit))
			return nil, nil, tooLarge
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			writeMessage(w, http.StatusRequestTimeout, "the request body came too slowly: past its first MiB it must average 256 KiB/s")
			return nil, nil, http.StatusRequestTimeout
		}
		if refuse != 0 {
			writeRefusal(w, broken, "could not read the request body")
			return nil, nil, broken
		}
		v := newValidationError()
		v.form("could not read the request body")
		writeValidation(w, v)
		return nil, nil, http.StatusBadRequest
	}
	return buf, release, 0
}

// rateFloor is a large body's reader while it holds a turn: it moves the
// connection's read deadline with what has been read, so that reading below
// the gate's data-rate floor times out.
type rateFloor struct {
	r     io.Reader
	rc    *http.ResponseController
	start time.Time
	n     int64
}

func (f *rateFloor) Read(b []byte) (int, error) {
	f.rc.SetReadDeadline(gate.Deadline(f.start, f.n))
	n, err := f.r.Read(b)
	f.n += int64(n)
	return n, err
}

// readFull appends up to n bytes of r to buf; it returns a nil error at the
// end of r or after n bytes.
func readFull(r io.Reader, buf []byte, n int64) ([]byte, error) {
	for int64(len(buf)) < n {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		end := min(int64(cap(buf)), n)
		m, err := r.Read(buf[len(buf):end])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// certificate answers the TLS certificate in use, PEM, or 404 when mailsink
// has none. It needs no key: a certificate is public, and a client must be
// able to fetch it before it can trust the listener it would send a key to.
func (a *API) certificate(w http.ResponseWriter, r *http.Request) {
	if a.cfg.Certificate == nil {
		writeMessage(w, http.StatusNotFound, "no TLS certificate is configured (MAILSINK_SMTP_TLS_CERT or MAILSINK_SMTP_TLS_AUTO)")
		return
	}
	pem := a.cfg.Certificate()
	w.Header().Set("Content-Type", "application/x-pem-file")
	w.Header().Set("Content-Length", strconv.Itoa(len(pem)))
	if r.Method != http.MethodHead {
		w.Write(pem)
	}
}
