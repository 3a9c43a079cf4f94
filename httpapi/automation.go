package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mailsink/mailsink/internal/eventhub"
	"github.com/mailsink/mailsink/store"
)

// The automation endpoints: list with wait, the event stream, raw and
// attachment downloads, and bulk delete.

const (
	// maxWait bounds the list operation's wait parameter, in seconds.
	maxWait = 60
	// waitRecheck is how often a held list request queries again once its
	// subscription was ended by the store (events lost in a Redis outage).
	waitRecheck = time.Second
	// bulkDeletePage is how many emails bulk delete lists at a time.
	bulkDeletePage = 100
)

// heldRequests bounds the requests per account that are held open: list
// requests waiting for an email, and event streams.
type heldRequests struct {
	max int
	mu  sync.Mutex
	n   map[string]int
	// waiting and streams count the held requests of each kind.
	waiting, streams atomic.Int64
}

// acquire takes a place for the account; it reports false when all are
// taken.
func (h *heldRequests) acquire(accountID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n[accountID] >= h.max {
		return false
	}
	h.n[accountID]++
	return true
}

func (h *heldRequests) release(accountID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n[accountID]--; h.n[accountID] <= 0 {
		delete(h.n, accountID)
	}
}

// InUse returns how many requests are held, in all accounts.
func (h *heldRequests) InUse() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, v := range h.n {
		n += v
	}
	return n
}

// waitForEmails answers a list request with wait: when the page is empty it
// holds the request until an event of the account makes it non-empty or
// the wait is over, then answers the page (empty on time-out, from one last
// query at the deadline). It reports false when it has already answered
// with an error.
func (a *API) waitForEmails(w http.ResponseWriter, r *http.Request, q store.ListQuery, wait time.Duration) ([]*store.Email, bool) {
	n := a.store
	a.held.waiting.Add(1)
	defer a.held.waiting.Add(-1)
	if !a.held.acquire(q.AccountID) {
		writeMessage(w, http.StatusTooManyRequests, fmt.Sprintf("too many waiting requests for this account (at most %d): retry later", a.held.max))
		return nil, false
	}
	defer a.held.release(q.AccountID)
	// Subscribe before the first query, so that an email stored between
	// the query and the wait still wakes it.
	sub := n.Subscribe(q.AccountID)
	defer func() { sub.Close() }()
	events := sub.Events()

	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	stopRecheck := func() {}
	defer func() { stopRecheck() }()
	// recheck ticks only while no subscription delivers events (the store
	// closed it); with one, the query runs again only for an event whose
	// email matches, so held requests cost no scans while mail for others
	// arrives.
	// A query that finds the store unavailable (a Redis failover) is
	// retried on the recheck ticker until the wait is over; only then is
	// the failure answered.
	var recheck <-chan time.Time
	startRecheck := func() {
		if recheck == nil {
			t := time.NewTicker(waitRecheck)
			recheck, stopRecheck = t.C, t.Stop
		}
	}
	match := store.NewMatcher(q)
	for {
		emails, err := a.query(r, q)
		switch {
		case err != nil && !store.IsCode(err, store.Unavailable):
			writeError(w, r, a.log, err)
			return nil, false
		case err == nil && len(emails) > 0:
			return emails, true
		case err != nil:
			startRecheck()
		}
		answer := func() ([]*store.Email, bool) {
			if err != nil {
				writeError(w, r, a.log, err)
				return nil, false
			}
			return emails, true
		}
		for woken := false; !woken; {
			select {
			case <-r.Context().Done():
				return nil, false // the client is gone: nothing to answer
			case <-deadline.C:
				// Once more: an email stored whose event did not come
				// (lost in a Redis failover, or still on its way) is
				// still answered.
				emails, err = a.query(r, q)
				return answer()
			case <-a.stopHeld:
				return answer()
			case <-recheck:
				woken = true
			case e, open := <-events:
				if !open {
					// Events may have been missed (a Redis outage):
					// subscribe again and query once.
					sub.Close()
					sub = n.Subscribe(q.AccountID)
					events, woken = sub.Events(), true
					startRecheck()
					continue
				}
				woken = e.Type != store.EmailDeleted && (e.Email == nil || match.Match(e.Email))
			}
		}
		drain(events)
	}
}

// drain empties what is already buffered in ch, so that a burst of events
// costs one query.
func drain(ch <-chan store.Event) {
	for ch != nil {
		select {
		case _, open := <-ch:
			if !open {
				return
			}
		default:
			return
		}
	}
}

// list runs one list query; it reports false when it has answered with an
// error.
func (a *API) list(w http.ResponseWriter, r *http.Request, q store.ListQuery) ([]*store.Email, bool) {
	emails, err := a.query(r, q)
	if err != nil {
		writeError(w, r, a.log, err)
		return nil, false
	}
	return emails, true
}

// query runs q against the store within the store timeout.
func (a *API) query(r *http.Request, q store.ListQuery) ([]*store.Email, error) {
	ctx, cancel := a.storeContext(r)
	defer cancel()
	return a.store.ListEmails(ctx, q)
}

// events streams the account's events as Server-Sent Events: each has the
// event id, the type as event name, and JSON data with the type, the email
// id and, unless deleted, the email summary as item. Last-Event-ID (header,
// or the lastEventId query parameter for clients that cannot set headers)
// replays the kept events after it first.
func (a *API) events(w http.ResponseWriter, r *http.Request) {
	n := a.store
	acc := accountOf(r)
	lastID := r.Header.Get("Last-Event-ID")
	if lastID == "" {
		lastID = r.URL.Query().Get("lastEventId")
	}
	if lastID != "" {
		if _, err := eventhub.ParseID(lastID); err != nil {
			v := newValidationError()
			v.field("Last-Event-ID", "must be an event id of this stream, like 1763805600000-0")
			writeValidation(w, v)
			return
		}
	}
	a.held.streams.Add(1)
	defer a.held.streams.Add(-1)
	if !a.held.acquire(acc.ID) {
		writeMessage(w, http.StatusTooManyRequests, fmt.Sprintf("too many open event streams and waiting requests for this account (at most %d)", a.held.max))
		return
	}
	defer a.held.release(acc.ID)
	sub := n.Subscribe(acc.ID)
	defer sub.Close()

	var backlog []store.Event
	complete := true
	if lastID != "" {
		ctx, cancel := a.storeContext(r)
		var err error
		backlog, complete, err = n.EventsAfter(ctx, acc.ID, lastID)
		cancel()
		if err != nil {
			writeError(w, r, a.log, err)
			return
		}
	}

	rc := http.NewResponseController(w)
	// The stream outlives the server's read timeout, which would otherwise
	// end it; writes get a deadline of their own in send.
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(chunk string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(a.cfg.SSEWriteTimeout))
		if _, err := fmt.Fprint(w, chunk); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send("retry: 2000\n: mailsink events for account " + acc.Slug + "\n\n") {
		return
	}
	if !complete {
		// Some events after Last-Event-ID are gone: the client should list
		// again rather than trust what it has.
		if !send("event: resync\ndata: {\"type\":\"resync\"}\n\n") {
			return
		}
	}
	// Live events up to the last one replayed (or the client's
	// Last-Event-ID) were sent already: the subscription started before the
	// backlog was read.
	var replayed eventhub.ID
	if lastID != "" {
		replayed, _ = eventhub.ParseID(lastID)
	}
	for _, e := range backlog {
		if !send(a.sseEvent(e)) {
			return
		}
		replayed, _ = eventhub.ParseID(e.ID)
	}

	heartbeat := time.NewTicker(a.cfg.SSEHeartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-a.stopHeld:
			return
		case <-heartbeat.C:
			if !send(": ping\n\n") {
				return
			}
		case e, open := <-sub.Events():
			if !open {
				return // the client reconnects with Last-Event-ID
			}
			if id, err := eventhub.ParseID(e.ID); err == nil && lastID != "" && !replayed.Less(id) {
				continue
			}
			if !send(a.sseEvent(e)) {
				return
			}
		}
	}
}

// eventJSON is the data of one event.
type eventJSON struct {
	Type    store.EventType `json:"type"`
	EmailID string          `json:"emailId"`
	Item    *emailJSON      `json:"item,omitempty"`
}

func (a *API) sseEvent(e store.Event) string {
	data := eventJSON{Type: e.Type, EmailID: e.EmailID}
	if e.Email != nil {
		item := a.emailJSON(e.Email)
		data.Item = &item
	}
	b, _ := json.Marshal(data)
	return "id: " + e.ID + "\nevent: " + string(e.Type) + "\ndata: " + string(b) + "\n\n"
}

// bulkDelete deletes the account's emails that match the list filters; at
// least one filter, or all=true, is required so that a typo cannot empty an
// account. It answers {"deleted": N}.
func (a *API) bulkDelete(w http.ResponseWriter, r *http.Request) {
	v := newValidationError()
	query := r.URL.Query()
	q, _ := parseListQuery(query, v)
	for _, name := range []string{"limit", "offset", "wait", "before"} {
		if query.Has(name) {
			v.field(name, "is not a filter of bulk delete")
		}
	}
	all := false
	if s, ok := first(query, "all"); ok {
		switch s {
		case "true":
			all = true
		case "false":
		default:
			v.field("all", "must be true or false")
		}
	}
	filtered := q.Recipient != "" || q.Sender != "" || q.Status != "" || q.Subject != "" || q.Label != "" || !q.Since.IsZero()
	if v.empty() && !filtered && !all {
		v.form("give at least one filter (recipient, sender, status, subject, label, since) or all=true")
	}
	if !v.empty() {
		writeValidation(w, v)
		return
	}
	q.AccountID = accountOf(r).ID
	q.Limit, q.Offset = bulkDeletePage, 0
	deleted, err := a.deleteMatching(r.Context(), q)
	if err != nil {
		// What was deleted stays deleted; the client retries the rest.
		a.log.Warn("bulk delete stopped early", "deleted", deleted, "err", err)
		writeError(w, r, a.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"deleted": deleted})
}

// deleteMatching deletes page after page of q's matches until none is left.
// An email deleted meanwhile by someone else is not counted.
func (a *API) deleteMatching(ctx context.Context, q store.ListQuery) (int64, error) {
	var deleted int64
	for {
		sctx, cancel := context.WithTimeout(ctx, a.cfg.StoreTimeout)
		emails, err := a.store.ListEmails(sctx, q)
		if err == nil {
			for _, e := range emails {
				if err = a.store.DeleteEmail(sctx, q.AccountID, e.ID); err == nil {
					deleted++
				} else if store.IsCode(err, store.NotFound) {
					err = nil
				} else {
					break
				}
			}
		}
		cancel()
		if err != nil || len(emails) < q.Limit {
			return deleted, err
		}
	}
}

// HeldRequests returns how many requests are held open now: list requests
// waiting for an email and event streams.
func (a *API) HeldRequests() int { return a.held.InUse() }

// WaitingRequests returns how many list requests are waiting for an email.
func (a *API) WaitingRequests() int { return int(a.held.waiting.Load()) }

// EventStreams returns how many event streams are open.
func (a *API) EventStreams() int { return int(a.held.streams.Load()) }
