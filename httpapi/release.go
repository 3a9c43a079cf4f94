package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/mailsink/mailsink/internal/relay"
	"github.com/mailsink/mailsink/store"
)

// Release: sending captured emails, as stored, to the account's relay
// (README, "Release"). package relay does the sending; these handlers read
// the request and say what became of it.

// maxReleaseRecipients bounds the recipients of one release.
const maxReleaseRecipients = 50

// releaseFilters are the query parameters of a bulk release: the list's
// filters and page. Any other parameter is refused rather than ignored, so
// that a filter this list does not know can never widen a release to every
// email; a filter joins here when parseListQuery or parseSearch reads it.
var releaseFilters = []string{"q", "recipient", "sender", "status", "subject", "label", "since", "before", "limit", "offset"}

// releaseRoutes adds the release routes with v1 when the API has a release
// service.
func (a *API) releaseRoutes(v1 func(path, method string, h http.HandlerFunc)) {
	if a.cfg.Relay == nil {
		return
	}
	v1("/emails/release", http.MethodPost, a.releaseMatching)
	v1("/emails/{emailId}/release", http.MethodPost, a.releaseEmail)
}

// releaseEmail sends one email to the recipients of {"to": [...]} through
// the account's relay and answers the upstream's reply to it:
// {"item": {"code": 250, "text": "..."}}.
func (a *API) releaseEmail(w http.ResponseWriter, r *http.Request) {
	id, ok := emailID(w, r)
	if !ok {
		return
	}
	to, ok := a.releaseRecipients(w, r)
	if !ok {
		return
	}
	reply, err := a.cfg.Relay.Release(r.Context(), accountOf(r).ID, id, to)
	if err != nil {
		a.writeReleaseError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]replyJSON{"item": {Code: reply.Code, Text: reply.Text}})
}

// releaseMatching sends the emails the list's filters select (a page of
// them: limit, at most 100) to the recipients of {"to": [...]}, over one
// connection, newest first, and answers what became of each:
// {"items": [{"id", "released", "code", "text"}]}.
func (a *API) releaseMatching(w http.ResponseWriter, r *http.Request) {
	v := newValidationError()
	query := r.URL.Query()
	q, _ := parseListQuery(query, v)
	sq := parseSearch(query, v)
	for name := range query {
		if !slices.Contains(releaseFilters, name) {
			v.field(name, "is not a filter of release: the filters are "+strings.Join(releaseFilters, ", "))
		}
	}
	if !v.empty() {
		writeValidation(w, v)
		return
	}
	to, ok := a.releaseRecipients(w, r)
	if !ok {
		return
	}
	acc := accountOf(r)
	// Without a relay, or with a recipient it does not allow, nothing is
	// listed.
	if _, err := a.cfg.Relay.Check(acc.ID, to); err != nil {
		a.writeReleaseError(w, r, err)
		return
	}
	q.AccountID = acc.ID
	emails, ok := a.list(w, r, q, sq)
	if !ok {
		return
	}
	ids := make([]string, len(emails))
	for i, e := range emails {
		ids[i] = e.ID
	}
	results, err := a.cfg.Relay.ReleaseEach(r.Context(), acc.ID, ids, to)
	if err != nil {
		a.writeReleaseError(w, r, err)
		return
	}
	items := make([]releaseResultJSON, len(results))
	for i, res := range results {
		items[i] = releaseResultJSON{ID: res.ID, Released: res.Err == nil}
		if res.Reply != nil {
			items[i].Code = &res.Reply.Code
			items[i].Text = res.Reply.Text
		}
		if res.Err != nil {
			items[i].Text = storeMessage(res.Err)
		}
	}
	writeJSON(w, http.StatusOK, map[string][]releaseResultJSON{"items": items})
}

// replyJSON is an upstream's reply (OpenAPI: ReleaseReply).
type replyJSON struct {
	Code int    `json:"code"`
	Text string `json:"text"`
}

// releaseResultJSON is what became of one email of a bulk release
// (OpenAPI: ReleaseResult).
type releaseResultJSON struct {
	ID       string `json:"id"`
	Released bool   `json:"released"`
	// Code is the upstream's reply code to the email; nil when it did not
	// answer for it (not sent, or the connection failed).
	Code *int   `json:"code"`
	Text string `json:"text"`
}

// releaseRecipients reads the request's {"to": [addresses]}: 1 to
// maxReleaseRecipients valid addresses, each kept once. It reports false
// when it has answered.
func (a *API) releaseRecipients(w http.ResponseWriter, r *http.Request) ([]string, bool) {
	obj, v, release, ok := a.readObject(w, r, a.cfg.MaxJSONBytes)
	if !ok {
		return nil, false
	}
	defer release()
	var to []string
	raw, present := obj.fields["to"]
	var items []json.RawMessage
	switch {
	case !present:
		v.field("to", "is required: the addresses to send the email to, like [\"qa@example.com\"]")
	case isNull(raw) || json.Unmarshal(raw, &items) != nil:
		v.field("to", "must be an array of email addresses")
	case len(items) == 0 || len(items) > maxReleaseRecipients:
		v.field("to", fmt.Sprintf("must have 1 to %d addresses", maxReleaseRecipients))
	default:
		seen := map[string]bool{}
		for i, it := range items {
			var s string
			if json.Unmarshal(it, &s) != nil || !store.ValidAddress(s) {
				v.field("to", "item "+strconv.Itoa(i)+" must be a valid email address")
				continue
			}
			if key := strings.ToLower(s); !seen[key] {
				seen[key] = true
				to = append(to, s)
			}
		}
	}
	if !v.empty() {
		writeValidation(w, v)
		return nil, false
	}
	return to, true
}

// writeReleaseError answers a release's error: a recipient the relay does
// not allow is 400 with fieldErrors.to, the account's rate 429 with
// Retry-After, the rest as writeError maps them (409 without a relay, 502
// for the upstream).
func (a *API) writeReleaseError(w http.ResponseWriter, r *http.Request, err error) {
	var refused *relay.RecipientsError
	if errors.As(err, &refused) {
		v := newValidationError()
		for _, addr := range refused.Refused {
			v.field("to", addr+" is not allowed by the account's relay (allowedRecipients): nothing was sent")
		}
		writeValidation(w, v)
		return
	}
	var limited *relay.LimitError
	if errors.As(err, &limited) {
		w.Header().Set("Retry-After", strconv.Itoa(int(limited.Wait.Seconds()+0.999)))
	}
	writeError(w, r, a.log, err)
}
