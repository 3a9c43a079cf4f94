package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/mailsink/mailsink/internal/faults"
	"github.com/mailsink/mailsink/store"
)

// The fault injection API (docs/smtp.md, "Fault injection"): POST, GET and
// DELETE /v1/faults, DELETE /v1/faults/{faultId}. The rules belong to the
// key's account and live in the store (package faults).

// faultJSON is a rule as the API shows it (OpenAPI: FaultRule).
type faultJSON struct {
	ID          string            `json:"id"`
	Stage       store.FaultStage  `json:"stage"`
	Reply       *store.FaultReply `json:"reply"`
	Delay       *string           `json:"delay"`
	Disconnect  bool              `json:"disconnect"`
	Recipient   *string           `json:"recipient"`
	Sender      *string           `json:"sender"`
	Count       *int64            `json:"count"`
	Remaining   *int64            `json:"remaining"`
	Probability *float64          `json:"probability"`
	CreatedAt   string            `json:"createdAt"`
	ExpiresAt   *string           `json:"expiresAt"`
}

func toFaultJSON(r *store.FaultRule) faultJSON {
	out := faultJSON{ID: r.ID, Stage: r.Stage, Reply: r.Reply, Disconnect: r.Disconnect,
		Probability: r.Probability, CreatedAt: formatTime(r.CreatedAt)}
	if r.Delay > 0 {
		d := r.Delay.String()
		out.Delay = &d
	}
	if r.Recipient != "" {
		out.Recipient = &r.Recipient
	}
	if r.Sender != "" {
		out.Sender = &r.Sender
	}
	if r.Count > 0 {
		out.Count, out.Remaining = &r.Count, &r.Remaining
	}
	if !r.ExpiresAt.IsZero() {
		t := formatTime(r.ExpiresAt)
		out.ExpiresAt = &t
	}
	return out
}

// faultFields are the fields a rule may have.
var faultFields = []string{"stage", "reply", "delay", "disconnect", "recipient", "sender", "count", "probability", "expiresIn"}

func (a *API) createFault(w http.ResponseWriter, r *http.Request) {
	obj, v, release, ok := a.readObject(w, r, a.cfg.MaxJSONBytes)
	if !ok {
		return
	}
	defer release()
	rule, expiresIn := parseFault(obj, a.cfg.Faults.MaxDelay())
	if !v.empty() {
		writeValidation(w, v)
		return
	}
	ctx, cancel := a.storeContext(r)
	defer cancel()
	if err := a.cfg.Faults.Create(ctx, accountOf(r).ID, rule, expiresIn); err != nil {
		writeError(w, r, a.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"item": toFaultJSON(rule)})
}

// parseFault reads a rule from obj, reporting every problem to obj's
// validation error.
func parseFault(obj *object, maxDelay time.Duration) (*store.FaultRule, time.Duration) {
	v := obj.v
	for name := range obj.fields {
		if !slices.Contains(faultFields, name) {
			v.field(name, "is not a field of a fault rule (fields: "+strings.Join(faultFields, ", ")+")")
		}
	}
	rule := &store.FaultRule{}
	stages := make([]string, len(store.FaultStages))
	for i, s := range store.FaultStages {
		stages[i] = string(s)
	}
	if s, ok := obj.str("stage", true, false, 0); ok {
		if rule.Stage = store.FaultStage(*s); !rule.Stage.Valid() {
			v.field("stage", "must be one of "+strings.Join(stages, ", "))
		}
	}
	if raw, ok := obj.fields["reply"]; ok && !isNull(raw) {
		rule.Reply = parseFaultReply(raw, v)
	}
	if d, ok := obj.duration("delay", maxDelay); ok {
		rule.Delay = d
	}
	if raw, ok := obj.fields["disconnect"]; ok && !isNull(raw) {
		if json.Unmarshal(raw, &rule.Disconnect) != nil {
			v.field("disconnect", "must be true or false")
		}
	}
	rule.Recipient = obj.addressFilter("recipient")
	rule.Sender = obj.addressFilter("sender")
	if raw, ok := obj.fields["count"]; ok && !isNull(raw) {
		if json.Unmarshal(raw, &rule.Count) != nil || rule.Count < 1 || rule.Count > faults.MaxCount {
			v.field("count", fmt.Sprintf("must be an integer from 1 to %d", faults.MaxCount))
			rule.Count = 0
		}
	}
	if raw, ok := obj.fields["probability"]; ok && !isNull(raw) {
		var p float64
		if json.Unmarshal(raw, &p) != nil || p < 0 || p > 1 {
			v.field("probability", "must be a number from 0 to 1")
		} else {
			rule.Probability = &p
		}
	}
	expiresIn, _ := obj.duration("expiresIn", faults.MaxExpiresIn)

	if rule.Reply == nil && rule.Delay == 0 && !rule.Disconnect && v.empty() {
		v.form("a fault rule needs at least one of reply, delay and disconnect")
	}
	if rule.Reply != nil && rule.Disconnect {
		v.field("disconnect", "closes the connection without a reply: leave out reply, or disconnect")
	}
	switch rule.Stage {
	case store.FaultAuth, store.FaultMail:
		if rule.Recipient != "" {
			v.field("recipient", fmt.Sprintf("recipients are not known yet at the %s stage: use rcpt, data or message", rule.Stage))
		}
		if rule.Stage == store.FaultAuth && rule.Sender != "" {
			v.field("sender", "the sender is not known yet at the auth stage")
		}
	}
	return rule, expiresIn
}

// parseFaultReply reads the reply object.
func parseFaultReply(raw json.RawMessage, v *validationError) *store.FaultReply {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		v.field("reply", `must be an object like {"code": 451, "text": "4.3.0 Try again later"}`)
		return nil
	}
	reply := &store.FaultReply{}
	valid := true
	for name := range fields {
		if name != "code" && name != "text" {
			v.field("reply", fmt.Sprintf("has no field %q (fields: code, text)", name))
			valid = false
		}
	}
	if c, ok := fields["code"]; !ok || json.Unmarshal(c, &reply.Code) != nil || reply.Code < 400 || reply.Code > 599 {
		v.field("reply.code", "must be an integer from 400 to 599: a fault is a temporary (4xx) or permanent (5xx) failure")
		valid = false
	}
	if t, ok := fields["text"]; ok && !isNull(t) {
		if json.Unmarshal(t, &reply.Text) != nil {
			v.field("reply.text", "must be a string")
			valid = false
		} else if len(reply.Text) > faults.MaxTextLength || strings.IndexFunc(reply.Text, func(r rune) bool { return r < 0x20 || r > 0x7e }) >= 0 {
			v.field("reply.text", fmt.Sprintf("must be at most %d printable ASCII characters, on one line", faults.MaxTextLength))
			valid = false
		}
	}
	if !valid {
		return nil
	}
	return reply
}

// duration reads a positive Go duration string ("1.5s", "2m") of at most
// limit.
func (o *object) duration(name string, limit time.Duration) (time.Duration, bool) {
	raw, ok := o.fields[name]
	if !ok || isNull(raw) {
		return 0, false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		o.v.field(name, `must be a duration string like "1.5s" or "2m"`)
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 || d > limit {
		o.v.field(name, fmt.Sprintf(`must be a duration string like "1.5s" or "2m", above 0 and at most %s`, limit))
		return 0, false
	}
	return d, true
}

// addressFilter reads an optional address or "@domain".
func (o *object) addressFilter(name string) string {
	s, ok := o.str(name, false, true, 0)
	if !ok || s == nil {
		return ""
	}
	addr := *s
	if strings.HasPrefix(addr, "@") {
		addr = "x" + addr
	}
	if !store.ValidAddress(addr) {
		o.v.field(name, "must be an address like a@acme.test, or @acme.test for a whole domain")
		return ""
	}
	return *s
}

func (a *API) listFaults(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.storeContext(r)
	defer cancel()
	rules, err := a.cfg.Faults.List(ctx, accountOf(r).ID)
	if err != nil {
		writeError(w, r, a.log, err)
		return
	}
	items := make([]faultJSON, len(rules))
	for i, rule := range rules {
		items[i] = toFaultJSON(rule)
	}
	writeJSON(w, http.StatusOK, map[string][]faultJSON{"items": items})
}

func (a *API) deleteFault(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["faultId"]
	if !store.ValidID(id) {
		v := newValidationError()
		v.field("faultId", "must be a UUID like 0190b6d2-7c3e-7a1b-8c2d-1234567890ab")
		writeValidation(w, v)
		return
	}
	ctx, cancel := a.storeContext(r)
	defer cancel()
	if err := a.cfg.Faults.Delete(ctx, accountOf(r).ID, store.NormalizeID(id)); err != nil {
		writeError(w, r, a.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) deleteFaults(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.storeContext(r)
	defer cancel()
	if err := a.cfg.Faults.DeleteAll(ctx, accountOf(r).ID); err != nil {
		writeError(w, r, a.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
