// Package metrics defines mailsink's Prometheus metrics on a registry that
// the caller owns, and a store.Store decorator that times every store
// operation. The SMTP and HTTP servers record into a *Metrics they are given;
// a nil *Metrics records nothing, so tests may leave it out.
package metrics

import (
	"context"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/mailsink/mailsink/store"
)

// Metrics holds every metric family of mailsink.
type Metrics struct {
	SMTPConnections prometheus.Counter
	SMTPRefused     prometheus.Counter     // connections over the limit
	SMTPRejected    *prometheus.CounterVec // refused recipients and AUTH failures, by reason
	SMTPMessages    *prometheus.CounterVec // by result: accepted, or the reason of a refusal
	SMTPBytes       prometheus.Counter
	SMTPRecipients  prometheus.Histogram
	SMTPLarge       *prometheus.GaugeVec     // messages over 1 MiB, by state: waiting or active
	SMTPFaults      *prometheus.CounterVec   // injected faults, by stage and action
	HTTPRequests    *prometheus.CounterVec   // by route, method, status
	HTTPDuration    *prometheus.HistogramVec // by route, method
	StoreDuration   *prometheus.HistogramVec // by operation, backend, result
	// RetentionDeleted counts emails deleted by retention, by account slug
	// and reason (age or count).
	RetentionDeleted *prometheus.CounterVec
	// ParsePanics counts messages whose MIME parsing panicked (they are
	// stored with what was parsed).
	ParsePanics prometheus.Counter
	// Writes follows how store writes end (writes.go).
	Writes *Writes
	// InboundWebhooks counts the provider webhooks' requests.
	InboundWebhooks *Inbound
	registerer      prometheus.Registerer
	// PerAccount, set before StoredEmails, lets metrics name accounts
	// (MAILSINK_METRICS_PER_ACCOUNT).
	PerAccount bool
}

// New registers mailsink's metrics on reg. version is reported by
// mailsink_build_info.
func New(reg prometheus.Registerer, version string) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{
		registerer: reg,
		SMTPConnections: f.NewCounter(prometheus.CounterOpts{
			Name: "mailsink_smtp_connections_total", Help: "SMTP connections accepted.",
		}),
		SMTPRefused: f.NewCounter(prometheus.CounterOpts{
			Name: "mailsink_smtp_connections_refused_total", Help: "SMTP connections refused with 421 because of the connection limit.",
		}),
		SMTPRejected: f.NewCounterVec(prometheus.CounterOpts{
			Name: "mailsink_smtp_rejections_total",
			Help: "SMTP commands refused before DATA, by reason: invalid_address (MAIL, RCPT), no_account (RCPT), auth_failed, auth_limited (AUTH), tls_required (MAIL, AUTH before STARTTLS), quota (RCPT to an account that can store no more).",
		}, []string{"reason"}),
		SMTPMessages: f.NewCounterVec(prometheus.CounterOpts{
			Name: "mailsink_smtp_messages_total",
			Help: "SMTP messages by result: accepted, or why they were refused (invalid, too_large, unavailable, line_too_long, internal, timeout, reset, connection_error, shutdown, fault).",
		}, []string{"result"}),
		SMTPBytes: f.NewCounter(prometheus.CounterOpts{
			Name: "mailsink_smtp_received_bytes_total", Help: "Bytes of SMTP messages accepted.",
		}),
		SMTPRecipients: f.NewHistogram(prometheus.HistogramOpts{
			Name: "mailsink_smtp_recipients_per_message", Help: "Accepted recipients per accepted SMTP message.",
			Buckets: []float64{1, 2, 3, 5, 10, 20, 50, 100},
		}),
		SMTPLarge: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mailsink_smtp_large_transfers",
			Help: "SMTP messages over 1 MiB now, by state: active (being read and stored) or waiting (for MAILSINK_SMTP_MAX_LARGE_TRANSFERS).",
		}, []string{"state"}),
		SMTPFaults: f.NewCounterVec(prometheus.CounterOpts{
			Name: "mailsink_smtp_faults_total",
			Help: "Faults injected into SMTP transactions by /v1/faults rules, by stage (auth, mail, rcpt, data, message) and action (reply, disconnect, or delay when the rule only delays).",
		}, []string{"stage", "action"}),
		HTTPRequests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "mailsink_http_requests_total", Help: "HTTP requests by route template, method and status.",
		}, []string{"route", "method", "status"}),
		HTTPDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mailsink_http_request_duration_seconds", Help: "HTTP request latency by route template and method (held requests included).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route", "method"}),
		StoreDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mailsink_store_operation_duration_seconds", Help: "Store operation latency by operation, backend and result (ok or the error code).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5},
		}, []string{"operation", "backend", "result"}),
		RetentionDeleted: f.NewCounterVec(prometheus.CounterOpts{
			Name: "mailsink_retention_deleted_total", Help: "Emails deleted by retention, by account slug and reason (age: older than the account's maximum age; count: beyond its maximum number of emails).",
		}, []string{"account", "reason"}),
		ParsePanics: f.NewCounter(prometheus.CounterOpts{
			Name: "mailsink_parse_panics_total", Help: "Messages whose MIME parsing panicked; each is stored with what was parsed before the panic.",
		}),
		Writes: newWrites(f),
	}
	m.InboundWebhooks = NewInbound(reg)
	goVersion := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
	}
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mailsink_build_info", Help: "Always 1; the labels tell the build.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": goVersion},
	}, func() float64 { return 1 })
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// HeldRequests registers the gauges of HTTP requests held open, read at
// scrape time: list requests waiting for an email, and event streams.
func (m *Metrics) HeldRequests(waiting, streams func() int) {
	if m == nil {
		return
	}
	f := promauto.With(m.registerer)
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mailsink_http_waiting_requests", Help: "List requests with wait held open now.",
	}, func() float64 { return float64(waiting()) })
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mailsink_sse_subscribers", Help: "Event streams (GET /v1/events) open now.",
	}, func() float64 { return float64(streams()) })
}

// SMTPMessage records the result of one SMTP message.
func (m *Metrics) SMTPMessage(result string, bytes, recipients int) {
	if m == nil {
		return
	}
	m.SMTPMessages.WithLabelValues(result).Inc()
	if result == "accepted" {
		m.SMTPBytes.Add(float64(bytes))
		m.SMTPRecipients.Observe(float64(recipients))
	}
}

// SMTPLargeTransfer adds delta to the large messages in state (active or
// waiting).
func (m *Metrics) SMTPLargeTransfer(state string, delta float64) {
	if m != nil {
		m.SMTPLarge.WithLabelValues(state).Add(delta)
	}
}

// The actions of SMTPFault: what the client saw.
const (
	FaultReply      = "reply"
	FaultDisconnect = "disconnect"
	FaultDelay      = "delay"
)

// faultStages and faultActions are SMTPFault's label sets, closed so that a
// caller's mistake cannot grow the series.
var (
	faultStages  = map[string]bool{"auth": true, "mail": true, "rcpt": true, "data": true, "message": true}
	faultActions = map[string]bool{FaultReply: true, FaultDisconnect: true, FaultDelay: true}
)

// SMTPFault records one injected fault at stage with action; unknown
// labels are recorded as "other".
func (m *Metrics) SMTPFault(stage, action string) {
	if m == nil {
		return
	}
	if !faultStages[stage] {
		stage = "other"
	}
	if !faultActions[action] {
		action = "other"
	}
	m.SMTPFaults.WithLabelValues(stage, action).Inc()
}

// SMTPConnectionRefused records one connection refused over the limit.
func (m *Metrics) SMTPConnectionRefused() {
	if m != nil {
		m.SMTPRefused.Inc()
	}
}

// SMTPRejection records a refused RCPT or AUTH, by reason.
func (m *Metrics) SMTPRejection(reason string) {
	if m != nil {
		m.SMTPRejected.WithLabelValues(reason).Inc()
	}
}

// SMTPConnection records one accepted SMTP connection.
func (m *Metrics) SMTPConnection() {
	if m != nil {
		m.SMTPConnections.Inc()
	}
}

// HTTPRequest records one answered HTTP request.
func (m *Metrics) HTTPRequest(route, method string, status int, d time.Duration) {
	if m == nil {
		return
	}
	method = methodLabel(method)
	m.HTTPRequests.WithLabelValues(route, method, statusText(status)).Inc()
	m.HTTPDuration.WithLabelValues(route, method).Observe(d.Seconds())
}

// methodLabel keeps the method label in a closed set: a client may send any
// token as its method, and every new label value is a series kept forever.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return method
	}
	return "other"
}

func statusText(code int) string {
	const digits = "0123456789"
	if code < 100 || code > 999 {
		return "other"
	}
	return string([]byte{digits[code/100], digits[code/10%10], digits[code%10]})
}

// Store times the email and idempotency operations of a store into
// StoreDuration, and tells Writes how its writes end. It is the whole
// store contract: the roles it does not time are the embedded store's own.
type Store struct {
	store.Store
	name   string
	hist   *prometheus.HistogramVec
	writes *Writes
}

var _ store.Store = (*Store)(nil)

// InstrumentStore returns st timed under the backend label name; with a nil
// m it returns st itself.
func (m *Metrics) InstrumentStore(st store.Store, name string) store.Store {
	if m == nil {
		return st
	}
	return &Store{Store: st, name: name, hist: m.StoreDuration, writes: m.Writes}
}

func (s *Store) observe(op string, start time.Time, err error) {
	result := "ok"
	if err != nil {
		result = store.CodeOf(err).String()
	}
	s.hist.WithLabelValues(op, s.name, result).Observe(time.Since(start).Seconds())
	if op == "create" {
		// Only creates tell whether the store takes new mail: a full
		// embedded store still deletes and updates (they write little).
		s.writes.record(err)
	}
}

// CreateEmails implements store.Store.
func (s *Store) CreateEmails(ctx context.Context, body *store.Body, emails []*store.Email) (err error) {
	defer func(start time.Time) { s.observe("create", start, err) }(time.Now())
	return s.Store.CreateEmails(ctx, body, emails)
}

// GetEmail implements store.Store.
func (s *Store) GetEmail(ctx context.Context, accountID, id string) (e *store.Email, err error) {
	defer func(start time.Time) { s.observe("get", start, err) }(time.Now())
	return s.Store.GetEmail(ctx, accountID, id)
}

// GetBody implements store.Store.
func (s *Store) GetBody(ctx context.Context, accountID, id string) (b *store.Body, err error) {
	defer func(start time.Time) { s.observe("get_body", start, err) }(time.Now())
	return s.Store.GetBody(ctx, accountID, id)
}

// ListEmails implements store.Store.
func (s *Store) ListEmails(ctx context.Context, q store.ListQuery) (out []*store.Email, err error) {
	defer func(start time.Time) { s.observe("list", start, err) }(time.Now())
	return s.Store.ListEmails(ctx, q)
}

// CountEmails implements store.Store.
func (s *Store) CountEmails(ctx context.Context, q store.ListQuery) (n int64, err error) {
	defer func(start time.Time) { s.observe("count", start, err) }(time.Now())
	return s.Store.CountEmails(ctx, q)
}

// UpdateEmail implements store.Store.
func (s *Store) UpdateEmail(ctx context.Context, accountID, id string, u store.Update) (e *store.Email, err error) {
	defer func(start time.Time) { s.observe("update", start, err) }(time.Now())
	return s.Store.UpdateEmail(ctx, accountID, id, u)
}

// DeleteEmail implements store.Store.
func (s *Store) DeleteEmail(ctx context.Context, accountID, id string) (err error) {
	defer func(start time.Time) { s.observe("delete", start, err) }(time.Now())
	return s.Store.DeleteEmail(ctx, accountID, id)
}

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) (err error) {
	defer func(start time.Time) { s.observe("ping", start, err) }(time.Now())
	return s.Store.Ping(ctx)
}

// Reserve implements store.Idempotency.
func (s *Store) Reserve(ctx context.Context, accountID, key string, r store.Reservation, ttl time.Duration) (got store.Reservation, fresh bool, err error) {
	defer func(start time.Time) { s.observe("reserve", start, err) }(time.Now())
	return s.Store.Reserve(ctx, accountID, key, r, ttl)
}

// Release implements store.Idempotency.
func (s *Store) Release(ctx context.Context, accountID, key string) (err error) {
	defer func(start time.Time) { s.observe("reserve", start, err) }(time.Now())
	return s.Store.Release(ctx, accountID, key)
}

// Settle implements store.Idempotency.
func (s *Store) Settle(ctx context.Context, accountID, key string) (err error) {
	defer func(start time.Time) { s.observe("reserve", start, err) }(time.Now())
	return s.Store.Settle(ctx, accountID, key)
}

// MailboxUIDs implements store.Store.
func (s *Store) MailboxUIDs(ctx context.Context, q store.UIDQuery) (p store.UIDPage, err error) {
	defer func(start time.Time) { s.observe("uids", start, err) }(time.Now())
	return s.Store.MailboxUIDs(ctx, q)
}
