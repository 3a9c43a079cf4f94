package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mailsink/mailsink/internal/search"
	"github.com/mailsink/mailsink/store"
)

// Limits of the API (api/openapi.yaml and docs/operations.md, "Limits").
const (
	maxListLimit     = 100
	defaultListLimit = 25
	maxOffset        = 9007199254740991
	maxSubjectFilter = 255
	maxSubject       = 998
	maxNotes         = 10000
	maxLabels        = 32
	maxLabelLength   = 64
)

var statusList = "received, processed, archived"

// parseListQuery validates the list operation's query string: the filters
// and page of the API, since (RFC 3339: only emails received after it),
// label (exact), before (an email id: only emails after it in list order)
// and wait (seconds to hold an empty answer, 1 to 60), which it returns
// apart. Count and bulk delete take the same filters.
// parseSearch returns the parsed q of a list, count or bulk request (the
// zero Query without one); a q that does not parse is refused, saying
// where.
func parseSearch(q url.Values, v *validationError) search.Query {
	s, ok := first(q, "q")
	if !ok {
		return search.Query{}
	}
	parsed, err := search.Parse(s)
	if err != nil {
		v.field("q", err.Error())
		return search.Query{}
	}
	return parsed
}

func parseListQuery(q url.Values, v *validationError) (store.ListQuery, time.Duration) {
	lq := store.ListQuery{Limit: defaultListLimit}
	var wait time.Duration
	if s, ok := first(q, "wait"); ok {
		if n, ok := parseInt(s, "wait", 1, maxWait, v); ok {
			wait = time.Duration(n) * time.Second
		}
	}
	if s, ok := first(q, "since"); ok {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			v.field("since", "must be an RFC 3339 date-time like 2026-11-22T10:00:00.000Z")
		} else {
			lq.Since = t.UTC()
		}
	}
	if s, ok := first(q, "limit"); ok {
		if n, ok := parseInt(s, "limit", 1, maxListLimit, v); ok {
			lq.Limit = int(n)
		}
	}
	if s, ok := first(q, "offset"); ok {
		if n, ok := parseInt(s, "offset", 0, maxOffset, v); ok {
			lq.Offset = n
		}
	}
	if s, ok := first(q, "recipient"); ok {
		lq.Recipient = checkAddress(s, "recipient", v)
	}
	if s, ok := first(q, "sender"); ok {
		lq.Sender = checkAddress(s, "sender", v)
	}
	if s, ok := first(q, "status"); ok {
		lq.Status = checkStatus(s, "status", v)
	}
	if s, ok := first(q, "subject"); ok {
		switch n := utf8.RuneCountInString(s); {
		case n < 1:
			v.field("subject", "must be at least 1 character")
		case n > maxSubjectFilter:
			v.field("subject", fmt.Sprintf("must be at most %d characters", maxSubjectFilter))
		default:
			lq.Subject = s
		}
	}
	if s, ok := first(q, "label"); ok {
		// The same rule as a label set by PATCH.
		if n := utf8.RuneCountInString(s); n < 1 || n > maxLabelLength {
			v.field("label", fmt.Sprintf("must be 1 to %d characters", maxLabelLength))
		} else {
			lq.Label = s
		}
	}
	if s, ok := first(q, "before"); ok {
		if store.ValidID(s) {
			lq.Before = store.NormalizeID(s)
		} else {
			v.field("before", "must be the id of an email, a UUID like 0190b6d2-7c3e-7a1b-8c2d-1234567890ab")
		}
	}
	if wait > 0 && lq.Before != "" {
		// New emails arrive ahead of the cursor, never after it.
		v.field("wait", "cannot be combined with before: new emails come before the cursor's email, never after it")
	}
	return lq, wait
}

func first(q url.Values, name string) (string, bool) {
	vals, ok := q[name]
	if !ok || len(vals) == 0 {
		return "", false
	}
	return vals[0], true
}

// parseInt parses a whole number in [lo, hi] written in plain decimal digits.
func parseInt(s, name string, lo, hi int64, v *validationError) (int64, bool) {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		v.field(name, "must be an integer")
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil && s[0] == '-', err == nil && n < lo:
		v.field(name, fmt.Sprintf("must be at least %d", lo))
		return 0, false
	case err != nil, n > hi:
		v.field(name, fmt.Sprintf("must be at most %d", hi))
		return 0, false
	}
	return n, true
}

func checkAddress(s, name string, v *validationError) string {
	if !store.ValidAddress(s) {
		v.field(name, "must be a valid email address")
		return ""
	}
	return s
}

func checkStatus(s, name string, v *validationError) store.Status {
	st := store.Status(s)
	if !st.Valid() {
		v.field(name, "must be one of "+statusList)
		return ""
	}
	return st
}

// object is a JSON request body split into its fields, for validation
// field by field with messages that name the field.
type object struct {
	fields map[string]json.RawMessage
	v      *validationError
}

// parseObject checks that body is one JSON object.
func parseObject(body []byte, v *validationError) (*object, bool) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		v.form("request body is required: send a JSON object")
		return nil, false
	}
	if !utf8.Valid(trimmed) {
		// encoding/json would turn the bad bytes into U+FFFD and store
		// that: the client would never learn that its text was changed.
		v.form("request body is not valid UTF-8, which JSON must be (RFC 8259)")
		return nil, false
	}
	if jsonDepth(trimmed) > maxJSONDepth {
		v.form(fmt.Sprintf("request body nests JSON deeper than %d levels", maxJSONDepth))
		return nil, false
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil || fields == nil {
		if json.Valid(trimmed) {
			v.form("request body must be a JSON object")
		} else {
			v.form("request body is not valid JSON")
		}
		return nil, false
	}
	return &object{fields: fields, v: v}, true
}

// maxJSONDepth bounds the nesting of a request body: no field of the API
// nests more than three levels, and a deeply nested body only costs work.
const maxJSONDepth = 32

// jsonDepth returns the deepest nesting of arrays and objects in b, which
// need not be valid JSON; brackets inside strings do not count.
func jsonDepth(b []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

// str reads a string field. It returns the value (nil for an explicit null
// when nullable) and whether the field was present and valid.
func (o *object) str(name string, required, nullable bool, maxLen int) (*string, bool) {
	raw, ok := o.fields[name]
	if !ok {
		if required {
			o.v.field(name, "is required")
		}
		return nil, false
	}
	if isNull(raw) {
		if !nullable {
			o.v.field(name, "must be a string, not null")
		}
		return nil, nullable
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		o.v.field(name, "must be a string")
		return nil, false
	}
	if maxLen > 0 && utf8.RuneCountInString(s) > maxLen {
		o.v.field(name, fmt.Sprintf("must be at most %d characters", maxLen))
		return nil, false
	}
	return &s, true
}

// boolean reads an optional boolean field; null is refused.
func (o *object) boolean(name string) (bool, bool) {
	raw, ok := o.fields[name]
	if !ok {
		return false, false
	}
	var b bool
	if isNull(raw) || json.Unmarshal(raw, &b) != nil {
		o.v.field(name, "must be true or false")
		return false, false
	}
	return b, true
}

// address reads a required address field.
func (o *object) address(name string) string {
	s, ok := o.str(name, true, false, 0)
	if !ok {
		return ""
	}
	return checkAddress(*s, name, o.v)
}

// headers reads an object of string values.
func (o *object) headers(name string) (map[string]string, bool) {
	raw, ok := o.fields[name]
	if !ok {
		return nil, false
	}
	var m map[string]json.RawMessage
	if isNull(raw) || json.Unmarshal(raw, &m) != nil {
		o.v.field(name, "must be an object of string values")
		return nil, false
	}
	out := make(map[string]string, len(m))
	for k, rv := range m {
		var s string
		if isNull(rv) || json.Unmarshal(rv, &s) != nil {
			o.v.field(name, fmt.Sprintf("value of %q must be a string", k))
			return nil, false
		}
		out[k] = s
	}
	return out, true
}

// time reads an RFC 3339 date-time field.
func (o *object) time(name string) (*time.Time, bool) {
	s, ok := o.str(name, false, false, 0)
	if !ok {
		return nil, false
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		o.v.field(name, "must be an RFC 3339 date-time like 2026-11-22T10:00:00.000Z")
		return nil, false
	}
	// Answers show times in UTC: a year outside 0001-9999 there has no RFC
	// 3339 form (an offset can push 0000 or 9999 over the edge).
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		o.v.field(name, "must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z in UTC")
		return nil, false
	}
	return &t, true
}

// labels reads the labels array.
func (o *object) labels(name string) (*[]string, bool) {
	raw, ok := o.fields[name]
	if !ok {
		return nil, false
	}
	var items []json.RawMessage
	if isNull(raw) || json.Unmarshal(raw, &items) != nil {
		o.v.field(name, "must be an array of strings")
		return nil, false
	}
	if len(items) > maxLabels {
		o.v.field(name, fmt.Sprintf("must have at most %d items", maxLabels))
		return nil, false
	}
	out := make([]string, 0, len(items))
	valid := true
	for i, it := range items {
		var s string
		if json.Unmarshal(it, &s) != nil {
			o.v.field(name, fmt.Sprintf("item %d must be a string", i))
			valid = false
			continue
		}
		if n := utf8.RuneCountInString(s); n < 1 || n > maxLabelLength {
			o.v.field(name, fmt.Sprintf("item %d must be 1 to %d characters", i, maxLabelLength))
			valid = false
			continue
		}
		out = append(out, s)
	}
	return &out, valid
}
