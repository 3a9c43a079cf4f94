package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/mailsink/mailsink/internal/apijson"
	"github.com/mailsink/mailsink/internal/jsonenc"
	"github.com/mailsink/mailsink/internal/search"
	"github.com/mailsink/mailsink/store"
)

// timeFormat is RFC 3339 in UTC with milliseconds (docs/api.md).
const timeFormat = apijson.TimeFormat

func formatTime(t time.Time) string { return apijson.Time(t) }

type (
	accountJSON = apijson.Account
	// emailJSON is the API's email summary (OpenAPI: EmailSummary).
	emailJSON = apijson.Email
)

func (a *API) emailJSON(e *store.Email) emailJSON {
	return apijson.NewEmail(e, a.accounts.ByID(e.AccountID)).WithSummary(a.summary(e))
}

// The email summaries of list, create, update and inbound answers are
// written by hand rather than by encoding/json: reflection and three
// time.Format calls per email were most of the CPU a list request costs
// (with writeJSON and emailJSON instead, BenchmarkEncodeList 6.8 -> 24 µs
// and BenchmarkListByRecipient 22 -> 38 µs, best of six runs each). The
// bytes are exactly those encoding/json writes for emailJSON with
// SetEscapeHTML(false), which TestAppendEmailMatchesEncodingJSON and
// FuzzAppendEmail check; the detail answer and the event stream use
// emailJSON itself.

// writeList writes the answer {"items": [...]} for emails.
func (a *API) writeList(w http.ResponseWriter, status int, emails []*store.Email) {
	buf := a.buffer()
	b := append(*buf, `{"items":[`...)
	var acc pageAccount
	sums, has := a.summaries(emails)
	for i, e := range emails {
		if i > 0 {
			b = append(b, ',')
		}
		b = a.appendEmailIn(b, e, &acc, sums[i], has[i])
	}
	b = append(b, "]}\n"...)
	writeBytes(w, status, b)
	a.release(buf, b)
}

// writeItem writes the answer {"item": ...} for e.
func (a *API) writeItem(w http.ResponseWriter, status int, e *store.Email) {
	buf := a.buffer()
	b := append(*buf, `{"item":`...)
	b = a.appendEmail(b, e)
	b = append(b, "}\n"...)
	writeBytes(w, status, b)
	a.release(buf, b)
}

// maxPooledBuffer bounds the answer buffers kept for reuse, so that one
// page of long subjects does not pin its memory for good.
const maxPooledBuffer = 256 << 10

func (a *API) buffer() *[]byte {
	if p, ok := a.buffers.Get().(*[]byte); ok {
		return p
	}
	b := make([]byte, 0, 16<<10)
	return &b
}

// release returns buf, grown to b, for reuse.
func (a *API) release(buf *[]byte, b []byte) {
	if cap(b) > maxPooledBuffer {
		return
	}
	*buf = b[:0]
	a.buffers.Put(buf)
}

// writeBytes writes b, a complete JSON answer, in one write with its
// length, so that the answer is not chunked.
func writeBytes(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// appendEmail appends e's summary, as encoding/json writes a.emailJSON(e).
func (a *API) appendEmail(b []byte, e *store.Email) []byte {
	d, ok := a.summary(e)
	return a.appendEmailIn(b, e, &pageAccount{}, d, ok)
}

// pageAccount is where in an answer being written the last email's
// account was encoded: the emails of a page share their account, so it is
// looked up and encoded once (by offsets, as the buffer may move).
type pageAccount struct {
	id         string
	start, end int
	set        bool
}

// appendEmailIn appends e's summary as appendEmail does, with d (ok false:
// none) as what the search index holds of its body, copying the account's
// JSON from earlier in b when acc says it is there.
func (a *API) appendEmailIn(b []byte, e *store.Email, acc *pageAccount, d search.Summary, ok bool) []byte {
	b = append(b, `{"id":`...)
	b = jsonenc.AppendString(b, e.ID)
	b = append(b, `,"account":`...)
	if acc.set && acc.id == e.AccountID {
		b = append(b, b[acc.start:acc.end]...)
	} else {
		*acc = pageAccount{id: e.AccountID, start: len(b), set: true}
		b = a.appendAccount(b, a.accounts.ByID(e.AccountID))
		acc.end = len(b)
	}
	b = append(b, `,"messageId":`...)
	b = appendOptString(b, e.MessageID)
	b = append(b, `,"sender":`...)
	b = jsonenc.AppendString(b, e.Sender)
	b = append(b, `,"recipient":`...)
	b = jsonenc.AppendString(b, e.Recipient)
	b = append(b, `,"subject":`...)
	b = appendOptString(b, e.Subject)
	b = append(b, `,"status":`...)
	b = jsonenc.AppendString(b, string(e.Status))
	b = append(b, `,"notes":`...)
	b = appendOptString(b, e.Notes)
	b = append(b, `,"labels":[`...)
	for i, l := range e.Labels {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(b, l)
	}
	b = append(b, `],"rawSize":`...)
	b = strconv.AppendInt(b, e.RawSize, 10)
	b = append(b, `,"receivedAt":`...)
	b = appendTime(b, e.ReceivedAt)
	b = append(b, `,"createdAt":`...)
	b = appendTime(b, e.CreatedAt)
	b = append(b, `,"updatedAt":`...)
	b = appendTime(b, e.UpdatedAt)
	b = append(b, `,"read":`...)
	b = strconv.AppendBool(b, e.Read)
	b = append(b, `,"fromName":`...)
	switch {
	case d.FromName != "":
		b = jsonenc.AppendString(b, d.FromName)
	default:
		b = append(b, "null"...)
	}
	b = append(b, `,"snippet":`...)
	if ok {
		b = jsonenc.AppendString(b, d.Snippet)
		b = append(b, `,"attachmentCount":`...)
		b = strconv.AppendInt(b, int64(d.Attachments), 10)
	} else {
		b = append(b, `null,"attachmentCount":null`...)
	}
	return append(b, '}')
}

// appendAccount appends acc as the account of an email summary: null
// when it is not known.
func (a *API) appendAccount(b []byte, acc *store.Account) []byte {
	if acc == nil {
		return append(b, "null"...)
	}
	b = append(b, `{"id":`...)
	b = jsonenc.AppendString(b, acc.ID)
	b = append(b, `,"slug":`...)
	b = jsonenc.AppendString(b, acc.Slug)
	b = append(b, `,"name":`...)
	b = jsonenc.AppendString(b, acc.Name)
	return append(b, '}')
}

// summary returns what the search index holds of e's body for a list,
// and false when it holds nothing yet.
func (a *API) summary(e *store.Email) (search.Summary, bool) {
	if a.cfg.Search == nil {
		return search.Summary{}, false
	}
	return a.cfg.Search.Summary(e.AccountID, e.ID)
}

// summaries is summary of each of emails, in one look at the index.
func (a *API) summaries(emails []*store.Email) ([]search.Summary, []bool) {
	if a.cfg.Search == nil {
		return make([]search.Summary, len(emails)), make([]bool, len(emails))
	}
	return a.cfg.Search.Summaries(emails)
}

func appendOptString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return jsonenc.AppendString(b, *s)
}

// appendTime appends t as a JSON string in timeFormat, as formatTime writes it.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = apijson.AppendTime(b, t)
	return append(b, '"')
}

// writeJSON writes v as the response body. HTML characters are not escaped:
// the answer is JSON for programs, served with nosniff.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
