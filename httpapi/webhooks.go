package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/gorilla/mux"

	"github.com/mailsink/mailsink/store"
)

// The outbound webhook endpoints (docs/webhooks.md): subscriptions of the
// key's account and their delivery logs.

const (
	// maxFilterSubject bounds a webhook's subject filter, in characters.
	maxFilterSubject = 200
	// defaultDeliveries and maxDeliveries bound a delivery log page.
	defaultDeliveries, maxDeliveries = 20, 100
)

// webhookEvents are the event types a webhook may subscribe to.
var webhookEvents = []store.EventType{store.EmailCreated, store.EmailUpdated, store.EmailDeleted}

// webhookRoutes adds the webhook routes with v1 when the API has a
// webhook service.
func (a *API) webhookRoutes(v1 func(path, method string, h http.HandlerFunc)) {
	if a.cfg.Webhooks == nil {
		return
	}
	v1("/webhooks", http.MethodGet, a.listWebhooks)
	v1("/webhooks", http.MethodPost, a.createWebhook)
	v1("/webhooks/{webhookId}", http.MethodGet, a.getWebhook)
	v1("/webhooks/{webhookId}", http.MethodDelete, a.deleteWebhook)
	v1("/webhooks/{webhookId}/deliveries", http.MethodGet, a.listDeliveries)
}

// webhookJSON is a webhook as the API shows it (OpenAPI: Webhook); Secret
// only in the answer to its creation.
type webhookJSON struct {
	ID             string            `json:"id"`
	URL            string            `json:"url"`
	Events         []store.EventType `json:"events"`
	Filters        filtersJSON       `json:"filters"`
	Secret         string            `json:"secret,omitempty"`
	Status         string            `json:"status"`
	DisabledAt     *string           `json:"disabledAt"`
	DisabledReason *string           `json:"disabledReason"`
	CreatedAt      string            `json:"createdAt"`
}

type filtersJSON struct {
	Recipient *string `json:"recipient"`
	Sender    *string `json:"sender"`
	Subject   *string `json:"subject"`
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func toWebhookJSON(w *store.Webhook) webhookJSON {
	out := webhookJSON{ID: w.ID, URL: w.URL, Events: w.Events, Status: "active", CreatedAt: formatTime(w.CreatedAt),
		Filters: filtersJSON{Recipient: optional(w.Filter.Recipient), Sender: optional(w.Filter.Sender), Subject: optional(w.Filter.Subject)}}
	if w.DisabledAt != nil {
		at := formatTime(*w.DisabledAt)
		out.Status, out.DisabledAt, out.DisabledReason = "disabled", &at, &w.DisabledReason
	}
	return out
}

func (a *API) createWebhook(w http.ResponseWriter, r *http.Request) {
	obj, v, release, ok := a.readObject(w, r, a.cfg.MaxJSONBytes)
	if !ok {
		return
	}
	defer release()
	acc := accountOf(r)
	hook := store.Webhook{AccountID: acc.ID}
	if u, ok := obj.str("url", true, false, 0); ok {
		if err := a.cfg.Webhooks.CheckURL(acc.ID, *u); err != nil {
			v.field("url", err.Error())
		}
		hook.URL = *u
	}
	hook.Events = parseEvents(obj, v)
	if raw, ok := obj.fields["filters"]; ok && !isNull(raw) {
		var fields map[string]json.RawMessage
		if json.Unmarshal(raw, &fields) != nil || fields == nil {
			v.field("filters", "must be an object with recipient, sender and subject")
		} else {
			f := &object{fields: fields, v: newValidationError()}
			if s, ok := f.str("recipient", false, true, 0); ok && s != nil {
				hook.Filter.Recipient = checkAddress(*s, "recipient", f.v)
			}
			if s, ok := f.str("sender", false, true, 0); ok && s != nil {
				hook.Filter.Sender = checkAddress(*s, "sender", f.v)
			}
			if s, ok := f.str("subject", false, true, maxFilterSubject); ok && s != nil {
				hook.Filter.Subject = *s
			}
			for name, msgs := range f.v.FieldErrors {
				for _, m := range msgs {
					v.field("filters."+name, m)
				}
			}
		}
	}
	if !v.empty() {
		writeValidation(w, v)
		return
	}
	ctx, cancel := a.storeContext(r)
	defer cancel()
	created, err := a.cfg.Webhooks.Create(ctx, hook)
	if err != nil {
		writeError(w, r, a.log, err)
		return
	}
	out := toWebhookJSON(created)
	out.Secret = created.Secret
	writeJSON(w, http.StatusCreated, map[string]any{"item": out})
}

// parseEvents reads the required, non-empty list of event types.
func parseEvents(obj *object, v *validationError) []store.EventType {
	raw, ok := obj.fields["events"]
	if !ok {
		v.field("events", "is required")
		return nil
	}
	var names []string
	if json.Unmarshal(raw, &names) != nil || names == nil {
		v.field("events", "must be a list of event types")
		return nil
	}
	if len(names) == 0 {
		v.field("events", "must list at least one event type")
		return nil
	}
	var out []store.EventType
	for _, n := range names {
		t := store.EventType(n)
		if !slices.Contains(webhookEvents, t) {
			v.field("events", "must hold only email.created, email.updated and email.deleted")
			return nil
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// webhookID validates the path's webhook id; a bad one is answered with 400.
func webhookID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := mux.Vars(r)["webhookId"]
	if !store.ValidID(id) {
		v := newValidationError()
		v.field("webhookId", "must be a UUID like 0190b6d2-7c3e-7a1b-8c2d-1234567890ab")
		writeValidation(w, v)
		return "", false
	}
	return store.NormalizeID(id), true
}

func (a *API) listWebhooks(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.storeContext(r)
	defer cancel()
	hooks, err := a.cfg.Webhooks.Store().ListWebhooks(ctx, accountOf(r).ID)
	if err != nil {
		writeError(w, r, a.log, err)
		return
	}
	items := make([]webhookJSON, 0, len(hooks))
	for _, h := range hooks {
		items = append(items, toWebhookJSON(h))
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (a *API) getWebhook(w http.ResponseWriter, r *http.Request) {
	id, ok := webhookID(w, r)
	if !ok {
		return
	}
	ctx, cancel := a.storeContext(r)
	defer cancel()
	h, err := a.cfg.Webhooks.Store().GetWebhook(ctx, accountOf(r).ID, id)
	if err != nil {
		writeError(w, r, a.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"item": toWebhookJSON(h)})
}

func (a *API) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	id, ok := webhookID(w, r)
	if !ok {
		return
	}
	ctx, cancel := a.storeContext(r)
	defer cancel()
	if err := a.cfg.Webhooks.Store().DeleteWebhook(ctx, accountOf(r).ID, id); err != nil {
		writeError(w, r, a.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// deliveryJSON is one delivery of a webhook's log (OpenAPI: WebhookDelivery).
type deliveryJSON struct {
	ID            string               `json:"id"`
	Type          store.EventType      `json:"type"`
	EmailID       string               `json:"emailId"`
	Status        store.DeliveryStatus `json:"status"`
	Attempts      int                  `json:"attempts"`
	CreatedAt     string               `json:"createdAt"`
	LastAttemptAt *string              `json:"lastAttemptAt"`
	NextAttemptAt *string              `json:"nextAttemptAt"`
	StatusCode    *int                 `json:"statusCode"`
	Error         *string              `json:"error"`
	Response      *string              `json:"response"`
}

func toDeliveryJSON(d *store.Delivery) deliveryJSON {
	out := deliveryJSON{ID: d.ID, Type: d.Type, EmailID: d.EmailID, Status: d.Status, Attempts: d.Attempts,
		CreatedAt: formatTime(d.CreatedAt), Error: optional(d.LastError)}
	if d.LastAttemptAt != nil {
		at := formatTime(*d.LastAttemptAt)
		out.LastAttemptAt, out.Response = &at, &d.LastResponse
	}
	if d.Status == store.DeliveryPending {
		next := formatTime(maxTime(d.NextAttemptAt, d.CreatedAt))
		out.NextAttemptAt = &next
	}
	if d.LastStatusCode != 0 {
		out.StatusCode = &d.LastStatusCode
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (a *API) listDeliveries(w http.ResponseWriter, r *http.Request) {
	id, ok := webhookID(w, r)
	if !ok {
		return
	}
	limit := int64(defaultDeliveries)
	if s, ok := first(r.URL.Query(), "limit"); ok {
		v := newValidationError()
		if limit, ok = parseInt(s, "limit", 1, maxDeliveries, v); !ok {
			writeValidation(w, v)
			return
		}
	}
	ctx, cancel := a.storeContext(r)
	defer cancel()
	acc := accountOf(r)
	ws := a.cfg.Webhooks.Store()
	if _, err := ws.GetWebhook(ctx, acc.ID, id); err != nil {
		writeError(w, r, a.log, err)
		return
	}
	ds, err := ws.ListDeliveries(ctx, acc.ID, id, int(limit))
	if err != nil {
		writeError(w, r, a.log, err)
		return
	}
	items := make([]deliveryJSON, 0, len(ds))
	for _, d := range ds {
		items = append(items, toDeliveryJSON(d))
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}
