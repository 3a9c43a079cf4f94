package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/mailsink/mailsink/internal/eventhub"
	"github.com/mailsink/mailsink/internal/held"
	"github.com/mailsink/mailsink/internal/search"
	"github.com/mailsink/mailsink/store"
)

// The automation endpoints: list with wait, the event stream, raw and
// attachment downloads, and bulk delete.

const (
	// maxWait bounds the list operation's wait parameter, in seconds.
	maxWait = 60
	// bulkDeletePage is how many emails bulk delete lists at a time.
	bulkDeletePage = 100
)

// waitForEmails answers a list request with wait: when the page is empty it
// holds the request until an event of the account makes it non-empty or
// the wait is over, then answers the page (empty on time-out, from one last
// query at the deadline). It reports false when it has already answered
// with an error, or the client is gone.
func (a *API) waitForEmails(w http.ResponseWriter, r *http.Request, q store.ListQuery, sq search.Query, wait time.Duration) ([]*store.Email, bool) {
	var from held.Store = a.store
	if !sq.Empty() {
		if err := a.searching(); err != nil {
			writeError(w, r, a.log, err)
			return nil, false
		}
		from = a.cfg.Search.Lister(sq)
	}
	a.waiting.Add(1)
	defer a.waiting.Add(-1)
	release, ok := a.held.Acquire(q.AccountID)
	if !ok {
		writeMessage(w, http.StatusTooManyRequests, fmt.Sprintf("too many waiting requests for this account (at most %d): retry later", a.held.Max()))
		return nil, false
	}
	defer release()
	emails, err := held.Wait(r.Context(), from, q, wait, a.cfg.StoreTimeout, a.held.Stopped())
	switch {
	case r.Context().Err() != nil:
		return nil, false // the client is gone: nothing to answer
	case err != nil:
		writeError(w, r, a.log, err)
		return nil, false
	}
	return emails, true
}

// list runs one list query; it reports false when it has answered with an
// error.
func (a *API) list(w http.ResponseWriter, r *http.Request, q store.ListQuery, sq search.Query) ([]*store.Email, bool) {
	emails, err := a.query(r, q, sq)
	if err != nil {
		writeError(w, r, a.log, err)
		return nil, false
	}
	return emails, true
}

// query runs q against the store, or with sq against the search index,
// within the store timeout.
func (a *API) query(r *http.Request, q store.ListQuery, sq search.Query) ([]*store.Email, error) {
	ctx, cancel := a.storeContext(r)
	defer cancel()
	if sq.Empty() {
		return a.store.ListEmails(ctx, q)
	}
	if err := a.searching(); err != nil {
		return nil, err
	}
	return a.cfg.Search.List(ctx, q, sq)
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
	a.streams.Add(1)
	defer a.streams.Add(-1)
	release, ok := a.held.Acquire(acc.ID)
	if !ok {
		writeMessage(w, http.StatusTooManyRequests, fmt.Sprintf("too many open event streams and waiting requests for this account (at most %d)", a.held.Max()))
		return
	}
	defer release()
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
		case <-a.held.Stopped():
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
	sq := parseSearch(query, v)
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
	filtered := q.Recipient != "" || q.Sender != "" || q.Status != "" || q.Subject != "" || q.Label != "" || !q.Since.IsZero() || !sq.Empty()
	if v.empty() && !filtered && !all {
		v.form("give at least one filter (q, recipient, sender, status, subject, label, since) or all=true")
	}
	if !v.empty() {
		writeValidation(w, v)
		return
	}
	q.AccountID = accountOf(r).ID
	q.Limit, q.Offset = bulkDeletePage, 0
	var deleted int64
	var err error
	if sq.Empty() {
		deleted, err = a.deleteMatching(r.Context(), q)
	} else if err = a.searching(); err == nil {
		deleted, err = a.deleteSearched(r.Context(), q, sq)
	}
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

// deleteSearched deletes the emails that q's filters and sq select, as the
// index finds them at the start. An email deleted meanwhile by someone
// else is not counted.
func (a *API) deleteSearched(ctx context.Context, q store.ListQuery, sq search.Query) (int64, error) {
	sctx, cancel := context.WithTimeout(ctx, a.cfg.StoreTimeout)
	ids, err := a.cfg.Search.IDs(sctx, q, sq)
	cancel()
	if err != nil {
		return 0, err
	}
	var deleted int64
	for _, id := range ids {
		dctx, cancel := context.WithTimeout(ctx, a.cfg.StoreTimeout)
		err := a.store.DeleteEmail(dctx, q.AccountID, id)
		cancel()
		switch {
		case err == nil:
			deleted++
		case !store.IsCode(err, store.NotFound):
			return deleted, err
		}
	}
	return deleted, nil
}

// HeldRequests returns how many requests are held open now, in all the
// doors that share Config.Held: list requests waiting for an email, event
// streams, and agents' waits.
func (a *API) HeldRequests() int { return a.held.InUse() }

// WaitingRequests returns how many list requests are waiting for an email.
func (a *API) WaitingRequests() int { return int(a.waiting.Load()) }

// EventStreams returns how many event streams are open.
func (a *API) EventStreams() int { return int(a.streams.Load()) }
