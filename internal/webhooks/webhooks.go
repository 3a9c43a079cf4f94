// Package webhooks delivers an account's email events to the URLs it
// subscribes (docs/webhooks.md): it manages the subscriptions, turns the
// store's events into a durable queue of deliveries, and runs the worker
// that posts them, signed the Standard Webhooks way, retried with
// exponential backoff, each target checked against the SSRF rules on every
// attempt.
//
// Durability. Every store writes an event with each change, in the same
// transaction (store.Events). The worker reads each account's events after
// a cursor kept in the store, and writes the deliveries they yield together
// with the new cursor in one store call (store.Webhooks), so a restart
// or a replica's death between the two only makes the next round read the
// same events again; deliveries have ids derived from the webhook and the
// event, so reading twice enqueues once. A delivery is attempted only under
// a lease taken in the store, so no two replicas attempt it at once, and a
// replica that dies holding one only delays it by the lease.
package webhooks

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mailsink/mailsink/internal/apijson"
	"github.com/mailsink/mailsink/internal/eventhub"
	"github.com/mailsink/mailsink/internal/metrics"
	"github.com/mailsink/mailsink/store"
)

// Config sets the limits and the schedule of deliveries; package config
// holds their defaults.
type Config struct {
	// MaxPerAccount bounds an account's webhooks.
	MaxPerAccount int
	// MaxURLLength bounds a webhook's URL, in bytes.
	MaxURLLength int
	// PollInterval is how often the worker looks for new events and due
	// deliveries.
	PollInterval time.Duration
	// AttemptTimeout bounds one attempt, from dialling to the end of
	// reading the answer.
	AttemptTimeout time.Duration
	// Concurrency bounds the attempts under way at once in this process.
	Concurrency int
	// RetryBase is the wait after the first failed attempt; each further
	// failure doubles it, up to RetryMax.
	RetryBase, RetryMax time.Duration
	// RetryFor is how long a delivery is retried after its event; when it
	// has failed for that long it is given up and its webhook disabled.
	RetryFor time.Duration
}

// maxResponse is how much of a receiver's answer is kept in the log.
const maxResponse = 256

// Service manages webhooks and delivers their events.
type Service struct {
	cfg      Config
	store    store.Webhooks
	events   store.Events
	accounts func(id string) *store.Account
	log      *slog.Logger
	metrics  *metrics.Webhooks
	now      func() time.Time
	// public delivers for most accounts, private for those that allow
	// private targets.
	public, private *http.Client
	// privateAccounts holds the ids of the accounts that allow private
	// targets.
	privateAccounts atomic.Pointer[map[string]bool]
	// token names this process's leases.
	token string
	slots chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	busy  map[string]int // attempts under way by account
}

// New returns a Service over a store that keeps webhooks and publishes
// events. accounts looks an account up for the payload (nil: the payload
// names the account by id only); m may be nil; dialer, when not nil,
// replaces the default Dialer (tests resolve names with it).
func New(cfg Config, ws store.Webhooks, events store.Events, accounts func(string) *store.Account,
	log *slog.Logger, m *metrics.Webhooks, dialer *Dialer) *Service {
	if dialer == nil {
		dialer = &Dialer{}
	}
	if dialer.Timeout == 0 {
		dialer.Timeout = cfg.AttemptTimeout
	}
	b := make([]byte, 12)
	rand.Read(b)
	s := &Service{cfg: cfg, store: ws, events: events, accounts: accounts, log: log, metrics: m, now: time.Now,
		token: hex.EncodeToString(b), slots: make(chan struct{}, max(cfg.Concurrency, 1)), busy: map[string]int{}}
	s.SetPrivateTargets(nil)
	// Connections are pooled per policy: one dialled for an account that
	// may reach private targets never carries another account's delivery.
	s.public = newClient(cfg, dialer.DialContext(false))
	s.private = newClient(cfg, dialer.DialContext(true))
	return s
}

func newClient(cfg Config, dial func(context.Context, string, string) (net.Conn, error)) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			// No proxy: the address checked must be the one dialled.
			Proxy:                  nil,
			DialContext:            dial,
			TLSHandshakeTimeout:    cfg.AttemptTimeout,
			ResponseHeaderTimeout:  cfg.AttemptTimeout,
			MaxResponseHeaderBytes: 16 << 10,
			DisableCompression:     true,
			MaxIdleConnsPerHost:    4,
			IdleConnTimeout:        30 * time.Second,
		},
		// A redirect is an answer like any other non-2xx: it is not
		// followed, so it cannot lead a delivery to an unchecked place.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// SetPrivateTargets sets the accounts that may deliver to private and
// loopback addresses (webhooks.allowPrivateTargets in the accounts file).
func (s *Service) SetPrivateTargets(accountIDs []string) {
	m := make(map[string]bool, len(accountIDs))
	for _, id := range accountIDs {
		m[id] = true
	}
	s.privateAccounts.Store(&m)
}

func (s *Service) allowPrivate(accountID string) bool { return (*s.privateAccounts.Load())[accountID] }

// AllowsPrivateTargets reports whether the account may reach private and
// loopback addresses (webhooks.allowPrivateTargets): the link check
// follows the same rule.
func (s *Service) AllowsPrivateTargets(accountID string) bool { return s.allowPrivate(accountID) }

// CheckURL checks a webhook URL for the account; the error is a message
// for the client.
func (s *Service) CheckURL(accountID, raw string) error {
	return CheckURL(raw, s.cfg.MaxURLLength, s.allowPrivate(accountID))
}

// Create stores a new webhook of w.AccountID with w's URL, events and
// filter, and returns it with its id, secret and creation time. The caller
// has validated them (CheckURL). It returns Conflict when the account has
// Config.MaxPerAccount webhooks.
func (s *Service) Create(ctx context.Context, w store.Webhook) (*store.Webhook, error) {
	w.ID = store.NewID()
	w.Secret = NewSecret()
	w.CreatedAt = s.now().UTC().Truncate(time.Millisecond)
	if err := s.store.CreateWebhook(ctx, &w, s.cfg.MaxPerAccount); err != nil {
		return nil, err
	}
	return &w, nil
}

// Store returns the store the Service keeps webhooks in.
func (s *Service) Store() store.Webhooks { return s.store }

// Run delivers until ctx is done, then waits for the attempts under way.
//
// Before it returns it queues the events that arrived since its last round
// (the embedded store keeps events only in memory, so they would be lost
// with the process); call it with the ingest stopped.
func (s *Service) Run(ctx context.Context) {
	defer s.wg.Wait()
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	for {
		s.round(ctx)
		select {
		case <-ctx.Done():
			s.drain(context.WithoutCancel(ctx))
			return
		case <-t.C:
		}
	}
}

// drainTimeout bounds the last round of Run.
const drainTimeout = 5 * time.Second

// drain queues the events of every account that has webhooks, without
// attempting deliveries.
func (s *Service) drain(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, drainTimeout)
	defer cancel()
	accounts, err := s.store.WebhookAccounts(ctx)
	if err != nil {
		s.log.Warn("webhooks: cannot queue the last events", "err", err)
		return
	}
	for _, acc := range accounts {
		if err := s.fanOut(ctx, acc); err != nil {
			s.log.Warn("webhooks: cannot queue the last events", "account", acc, "err", err)
		}
	}
}

// round turns new events into deliveries and starts the due attempts, for
// every account with webhooks.
func (s *Service) round(ctx context.Context) {
	accounts, err := s.store.WebhookAccounts(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("webhooks: cannot list accounts", "err", err)
		}
		return
	}
	for _, acc := range accounts {
		if ctx.Err() != nil {
			return
		}
		if err := s.fanOut(ctx, acc); err != nil && ctx.Err() == nil {
			s.log.Warn("webhooks: cannot queue events", "account", acc, "err", err)
		}
		if err := s.dispatch(ctx, acc); err != nil && ctx.Err() == nil {
			s.log.Warn("webhooks: cannot claim deliveries", "account", acc, "err", err)
		}
	}
}

// fanOut turns the account's events after its cursor into deliveries.
func (s *Service) fanOut(ctx context.Context, accountID string) error {
	hooks, err := s.store.ListWebhooks(ctx, accountID)
	if err != nil || len(hooks) == 0 {
		return err
	}
	cursor, err := s.store.WebhookCursor(ctx, accountID)
	if err != nil {
		return err
	}
	initial := cursor == ""
	if initial {
		cursor = eventhub.ID{MS: hooks[0].CreatedAt.Add(-clockSlack).UnixMilli()}.String()
	}
	asked := s.now()
	events, complete, err := s.events.EventsAfter(ctx, accountID, cursor)
	if err != nil {
		return err
	}
	next := cursor
	if len(events) > 0 {
		next = events[len(events)-1].ID
	}
	if !complete && !initial {
		s.log.Warn("webhooks: the store's event history no longer reaches the last event queued (a restart of the embedded store, or a backlog past the Redis stream's bound); events in the gap are not delivered",
			"account", accountID, "cursor", cursor)
		if s.metrics != nil {
			s.metrics.MissedEvents.Inc()
		}
		if len(events) == 0 {
			// The gap is reported once: go on from the time of the read.
			// (Only the embedded store answers so, with ids from this
			// process's clock.)
			next = eventhub.ID{MS: asked.UnixMilli() - 1, Seq: math.MaxInt32}.String()
		}
	}
	if next == cursor {
		return nil
	}
	if len(events) > 0 {
		// The webhooks again: one made after the first read may have
		// events in this batch (wants leaves out those from before it).
		if hooks, err = s.store.ListWebhooks(ctx, accountID); err != nil {
			return err
		}
	}
	var ds []*store.Delivery
	now := s.now().UTC()
	for _, e := range events {
		for _, h := range hooks {
			if !wants(h, e) {
				continue
			}
			d, err := s.newDelivery(h, e, now)
			if err != nil {
				return err
			}
			ds = append(ds, d)
		}
	}
	return s.store.EnqueueDeliveries(ctx, accountID, next, ds)
}

// clockSlack is how far event ids (from the Redis server's clock, or the
// process's) may lag the clock of the replica that made a webhook: events
// that much older than the webhook may reach it, so that none after it is
// missed.
const clockSlack = 2 * time.Second

// wants reports whether webhook h takes event e. Deleted events carry no
// email, so a webhook with a filter cannot tell whether they match and
// does not get them.
func wants(h *store.Webhook, e store.Event) bool {
	if h.DisabledAt != nil {
		return false
	}
	// Events before the webhook was made are not its own: those whose id
	// (the store's clock) is older than it by more than clockSlack, and
	// the creation of an email created before it, by the email's own
	// createdAt (a replica's clock, as the webhook's).
	id, err := eventhub.ParseID(e.ID)
	if err == nil && id.MS < h.CreatedAt.Add(-clockSlack).UnixMilli() {
		return false
	}
	if e.Type == store.EmailCreated && e.Email != nil && e.Email.CreatedAt.Before(h.CreatedAt) {
		return false
	}
	typeOK := false
	for _, t := range h.Events {
		typeOK = typeOK || t == e.Type
	}
	if !typeOK {
		return false
	}
	f := h.Filter
	if f == (store.WebhookFilter{}) {
		return true
	}
	if e.Email == nil {
		return false
	}
	if f.Recipient != "" && store.NormalizeAddress(f.Recipient) != store.NormalizeAddress(e.Email.Recipient) {
		return false
	}
	if f.Sender != "" && store.NormalizeAddress(f.Sender) != store.NormalizeAddress(e.Email.Sender) {
		return false
	}
	if f.Subject != "" {
		subj := ""
		if e.Email.Subject != nil {
			subj = *e.Email.Subject
		}
		if !strings.Contains(strings.ToLower(subj), strings.ToLower(f.Subject)) {
			return false
		}
	}
	return true
}

// payload is a delivery's body (docs/webhooks.md).
type payload struct {
	Type      store.EventType `json:"type"`
	Timestamp string          `json:"timestamp"`
	Data      any             `json:"data"`
}

// deleted is the data of an email.deleted delivery: what is known.
type deleted struct {
	ID      string           `json:"id"`
	Account *apijson.Account `json:"account"`
}

// account returns the account with id, as the API shows it (nil when it is
// no longer configured).
func (s *Service) account(id string) *store.Account {
	if s.accounts == nil {
		return nil
	}
	return s.accounts(id)
}

func (s *Service) newDelivery(h *store.Webhook, e store.Event, now time.Time) (*store.Delivery, error) {
	at := now
	if id, err := eventhub.ParseID(e.ID); err == nil {
		at = time.UnixMilli(id.MS).UTC()
	}
	p := payload{Type: e.Type, Timestamp: apijson.Time(at)}
	if e.Email != nil {
		p.Data = apijson.NewEmail(e.Email, s.account(e.AccountID))
	} else {
		p.Data = deleted{ID: e.EmailID, Account: apijson.NewAccount(s.account(e.AccountID))}
	}
	body, err := json.Marshal(p)
	if err != nil {
		return nil, store.Wrap(store.Internal, err, "encode delivery")
	}
	sum := sha256.Sum256([]byte(h.ID + "/" + e.ID))
	return &store.Delivery{
		ID: "msg_" + hex.EncodeToString(sum[:16]), AccountID: h.AccountID, WebhookID: h.ID, EventID: e.ID,
		Type: e.Type, EmailID: e.EmailID, Payload: body, CreatedAt: now, Status: store.DeliveryPending,
		NextAttemptAt: now,
	}, nil
}

// lease is how long a claimed delivery stays with this process: longer
// than an attempt and the store calls around it.
func (s *Service) lease() time.Duration { return 2*s.cfg.AttemptTimeout + 30*time.Second }

// dispatch claims as many of the account's due deliveries as there are
// free slots and attempts each in its own goroutine.
//
// One account gets at most half of the slots (at least one), so that its
// hanging receivers cannot hold up the other accounts' deliveries.
func (s *Service) dispatch(ctx context.Context, accountID string) error {
	perAccount := max(1, cap(s.slots)/2)
	s.mu.Lock()
	free := min(cap(s.slots)-len(s.slots), perAccount-s.busy[accountID])
	s.mu.Unlock()
	if free <= 0 {
		return nil
	}
	ds, err := s.store.ClaimDeliveries(ctx, accountID, s.now(), s.lease(), s.token, free)
	if err != nil {
		return err
	}
	for _, d := range ds {
		s.slots <- struct{}{}
		s.mu.Lock()
		s.busy[accountID]++
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer func() {
				s.mu.Lock()
				if s.busy[accountID]--; s.busy[accountID] == 0 {
					delete(s.busy, accountID)
				}
				s.mu.Unlock()
				<-s.slots
				s.wg.Done()
			}()
			s.attempt(ctx, d)
		}()
	}
	return nil
}

// attempt posts d once and records the outcome in the store. When ctx
// ends (shutdown) the attempt is cut short and recorded as failed, so that
// it is made again.
func (s *Service) attempt(ctx context.Context, d *store.Delivery) {
	h, err := s.store.GetWebhook(ctx, d.AccountID, d.WebhookID)
	if store.IsCode(err, store.NotFound) {
		// Deleted with its deliveries; this one was queued meanwhile.
		d.Status, d.LastError = store.DeliveryFailed, "webhook deleted"
		s.finish(ctx, d)
		return
	}
	if err != nil {
		s.log.Warn("webhooks: cannot read webhook", "webhook", d.WebhookID, "err", err)
		return // the lease runs out and the delivery comes back
	}
	now := s.now().UTC()
	if h.DisabledAt != nil {
		d.Status, d.LastError = store.DeliveryFailed, "webhook disabled: "+h.DisabledReason
		s.finish(ctx, d)
		return
	}
	if createdBefore(h, d) {
		d.Status, d.LastError = store.DeliveryFailed, "not delivered: the email was created before the webhook"
		s.finish(ctx, d)
		return
	}
	status, body, outcome, err := s.post(ctx, h, d)
	ctx = context.WithoutCancel(ctx)
	d.Attempts++
	d.LastAttemptAt = &now
	d.LastStatusCode, d.LastResponse, d.LastError = status, body, ""
	if err != nil {
		d.LastError = err.Error()
	}
	if s.metrics != nil {
		s.metrics.Attempts.WithLabelValues(outcome).Inc()
		s.metrics.Duration.Observe(s.now().Sub(now).Seconds())
	}
	if outcome == "success" {
		d.Status = store.DeliverySucceeded
		s.finish(ctx, d)
		return
	}
	if d.LastError == "" {
		d.LastError = "receiver answered " + strconv.Itoa(status)
	}
	// RetryFor counts from the event (its id holds its time), not from when
	// a backlog got round to queueing it.
	end := d.CreatedAt.Add(s.cfg.RetryFor)
	if id, err := eventhub.ParseID(d.EventID); err == nil && id.MS > 0 {
		end = time.UnixMilli(id.MS).Add(s.cfg.RetryFor)
	}
	if !now.Before(end) {
		d.Status = store.DeliveryFailed
		s.finish(ctx, d)
		if s.metrics != nil {
			s.metrics.GaveUp.Inc()
		}
		reason := fmt.Sprintf("deliveries failed for %s; the last attempt: %s", s.cfg.RetryFor, d.LastError)
		if err := s.store.DisableWebhook(ctx, h.AccountID, h.ID, reason, now); err != nil {
			s.log.Warn("webhooks: cannot disable webhook", "webhook", h.ID, "err", err)
		} else if s.metrics != nil {
			s.metrics.Disabled.Inc()
		}
		return
	}
	next := now.Add(s.backoff(d.Attempts))
	if next.After(end) {
		next = end
	}
	d.NextAttemptAt = next
	s.finish(ctx, d)
}

// createdBefore reports whether d is the creation of an email created
// before webhook h. wants never queues one, but an earlier release let the
// clockSlack before a webhook through, and such a delivery may wait in the
// queue while its receiver is down.
func createdBefore(h *store.Webhook, d *store.Delivery) bool {
	if d.Type != store.EmailCreated {
		return false
	}
	var p struct {
		Data struct {
			CreatedAt time.Time `json:"createdAt"`
		} `json:"data"`
	}
	return json.Unmarshal(d.Payload, &p) == nil && !p.Data.CreatedAt.IsZero() && p.Data.CreatedAt.Before(h.CreatedAt)
}

func (s *Service) finish(ctx context.Context, d *store.Delivery) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.AttemptTimeout+10*time.Second)
	defer cancel()
	if err := s.store.FinishDelivery(ctx, d, s.token); err != nil && !store.IsCode(err, store.NotFound) {
		s.log.Warn("webhooks: cannot record attempt", "delivery", d.ID, "err", err)
	}
}

// backoff is the wait after the nth failed attempt: RetryBase doubled
// n-1 times, at most RetryMax, less up to a fifth at random so that
// receivers that came back are not hit by every retry at once.
func (s *Service) backoff(n int) time.Duration {
	d := float64(s.cfg.RetryBase) * math.Pow(2, float64(min(n-1, 62)))
	if d > float64(s.cfg.RetryMax) {
		d = float64(s.cfg.RetryMax)
	}
	return time.Duration(d * (1 - mrand.Float64()/5))
}

// post makes one attempt: it answers the receiver's status, the start of
// its answer, the outcome label and what went wrong.
func (s *Service) post(ctx context.Context, h *store.Webhook, d *store.Delivery) (int, string, string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.AttemptTimeout)
	defer cancel()
	client := s.public
	if s.allowPrivate(h.AccountID) {
		client = s.private
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(d.Payload))
	if err != nil {
		return 0, "", "network_error", errors.New("invalid URL")
	}
	ts := s.now().Unix()
	sig, err := Sign(h.Secret, d.ID, ts, d.Payload)
	if err != nil {
		return 0, "", "network_error", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "mailsink-webhooks")
	req.Header.Set("webhook-id", d.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := client.Do(req)
	if err != nil {
		var refused *RefusedAddressError
		var nerr net.Error
		switch {
		case errors.As(err, &refused):
			return 0, "", "refused_address", refused
		case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &nerr) && nerr.Timeout():
			return 0, "", "timeout", fmt.Errorf("no answer within %s", s.cfg.AttemptTimeout)
		}
		return 0, "", "network_error", errors.New(describe(err))
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	body := strings.ToValidUTF8(string(b), "")
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return resp.StatusCode, body, "success", nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return resp.StatusCode, body, "redirect", fmt.Errorf("receiver answered %d, a redirect (not followed)", resp.StatusCode)
	}
	return resp.StatusCode, body, "http_error", nil
}

// describe is a network error without the request's URL, which go puts in
// front of it.
func describe(err error) string {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err.Error()
	}
	return err.Error()
}
