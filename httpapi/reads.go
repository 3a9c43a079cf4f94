package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"

	"github.com/gorilla/mux"

	"github.com/mailsink/mailsink/internal/bodies"
	"github.com/mailsink/mailsink/internal/codes"
	"github.com/mailsink/mailsink/internal/jsonenc"
	"github.com/mailsink/mailsink/internal/links"
	"github.com/mailsink/mailsink/internal/mailparse"
)

// The readers of one email's content. Each opens a read of the bodies
// service (package bodies), which holds the read to its share of the read
// budget; large answers are streamed, not built whole.

// openRead opens the request's email, parsed or not, under the request's
// store timeout; it reports false when it has answered with an error. The
// caller closes the read, and calls done when it no longer needs the
// context.
func (a *API) openRead(w http.ResponseWriter, r *http.Request, parsed bool) (read *bodies.Read, ctx context.Context, done func(), ok bool) {
	id, ok := emailID(w, r)
	if !ok {
		return nil, nil, nil, false
	}
	ctx, cancel := a.storeContext(r)
	open := a.cfg.Bodies.Raw
	if parsed {
		open = a.cfg.Bodies.Parsed
	}
	read, err := open(ctx, accountOf(r).ID, id)
	if err != nil {
		cancel()
		writeError(w, r, a.log, err)
		return nil, nil, nil, false
	}
	return read, ctx, cancel, true
}

// getEmail answers the email's detail: its summary and body. The body's
// raw source, text and HTML are encoded as they are written, through a
// small buffer, so that a large message does not cost its JSON form in
// memory.
func (a *API) getEmail(w http.ResponseWriter, r *http.Request) {
	read, _, done, ok := a.openRead(w, r, true)
	if !ok {
		return
	}
	defer done()
	defer read.Close()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	jw := jsonenc.NewWriter(bw)
	summary := a.appendEmail(nil, read.Email)
	jw.Raw(`{"item":`)
	jw.Raw(string(summary[:len(summary)-1])) // without its closing brace
	jw.Raw(`,"body":`)
	writeBody(jw, read.Body)
	jw.Raw("}}\n")
	if jw.Flush() == nil {
		bw.Flush()
	}
}

// writeBody writes the detail's body object (OpenAPI: StoredEmailBody):
// SPEC.md's fields, then truncated, which says what the parser's limits
// left out.
func writeBody(jw *jsonenc.Writer, b *bodies.Body) {
	jw.Raw(`{"raw":`)
	jw.Bytes(b.Raw)
	jw.Raw(`,"text":`)
	jw.OptString(b.Text)
	jw.Raw(`,"html":`)
	jw.OptString(b.HTML)
	jw.Raw(`,"headers":{`)
	keys := make([]string, 0, len(b.Headers))
	for k := range b.Headers {
		keys = append(keys, k)
	}
	slices.Sort(keys) // as encoding/json orders a map
	for i, k := range keys {
		if i > 0 {
			jw.Raw(",")
		}
		jw.String(k)
		jw.Raw(":")
		jw.String(b.Headers[k])
	}
	jw.Raw(`},"attachments":[`)
	for i, at := range b.Attachments {
		if i > 0 {
			jw.Raw(",")
		}
		jw.Raw(`{"contentId":`)
		jw.OptString(at.ContentID)
		jw.Raw(`,"contentType":`)
		jw.OptString(at.ContentType)
		jw.Raw(`,"disposition":`)
		jw.OptString(at.Disposition)
		jw.Raw(`,"filename":`)
		jw.OptString(at.Filename)
		jw.Raw(`,"size":` + strconv.FormatInt(at.Size, 10) + "}")
	}
	jw.Raw(`],"truncated":[`)
	for i, c := range cuts(b.Cut) {
		if i > 0 {
			jw.Raw(",")
		}
		jw.Raw(`{"what":"` + c.what + `","limit":` + strconv.Itoa(c.limit) + "}")
	}
	jw.Raw("]}")
}

// cut is one limit of the parser that a message went past.
type cut struct {
	what  string
	limit int
}

// cuts lists what c says was left out (OpenAPI: StoredEmailBody.truncated).
func cuts(c mailparse.Cut) []cut {
	var out []cut
	if c.HeaderFields {
		out = append(out, cut{"headerFields", mailparse.MaxHeaderFields})
	}
	if c.Parts {
		out = append(out, cut{"parts", mailparse.MaxParts})
	}
	if c.Depth {
		out = append(out, cut{"depth", mailparse.MaxDepth})
	}
	return out
}

// linkJSON is one item of the links answer; Text is null when the link has
// none.
type linkJSON struct {
	URL  string  `json:"url"`
	Text *string `json:"text"`
}

// emailLinks answers {"items": [{"url", "text"}]}: the links of the email's
// HTML part, then those of its text part not already listed (package links).
func (a *API) emailLinks(w http.ResponseWriter, r *http.Request) {
	read, ctx, done, ok := a.openRead(w, r, true)
	if !ok {
		return
	}
	defer done()
	defer read.Close()
	htmlPart, textPart := deref(read.Body.HTML), deref(read.Body.Text)
	// The links hold at most what they were found in.
	if err := read.Grow(ctx, int64(min(len(htmlPart), links.MaxScan)+min(len(textPart), links.MaxScan))); err != nil {
		writeError(w, r, a.log, err)
		return
	}
	found, err := links.Extract(ctx, htmlPart, textPart)
	if err != nil {
		writeError(w, r, a.log, ended(err))
		return
	}
	items := make([]linkJSON, len(found))
	for i, l := range found {
		items[i] = linkJSON{URL: l.URL, Text: l.Text}
	}
	writeJSON(w, http.StatusOK, map[string][]linkJSON{"items": items})
}

// codeJSON is one item of the codes answer.
type codeJSON struct {
	Value string `json:"value"`
}

// emailCodes answers {"items": [{"value"}]}: the one-time codes of the
// email's subject, text part and HTML part (package codes).
func (a *API) emailCodes(w http.ResponseWriter, r *http.Request) {
	read, ctx, done, ok := a.openRead(w, r, true)
	if !ok {
		return
	}
	defer done()
	defer read.Close()
	found, err := codes.Extract(ctx, deref(read.Email.Subject), deref(read.Body.Text), deref(read.Body.HTML))
	if err != nil {
		writeError(w, r, a.log, ended(err))
		return
	}
	items := make([]codeJSON, len(found))
	for i, v := range found {
		items[i] = codeJSON{Value: v}
	}
	writeJSON(w, http.StatusOK, map[string][]codeJSON{"items": items})
}

// rawEmail answers the raw source, byte-exact, without parsing it.
func (a *API) rawEmail(w http.ResponseWriter, r *http.Request) {
	read, _, done, ok := a.openRead(w, r, false)
	if !ok {
		return
	}
	defer done()
	defer read.Close()
	h := w.Header()
	h.Set("Content-Type", "message/rfc822")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": read.Email.ID + ".eml"}))
	h.Set("Content-Length", strconv.Itoa(len(read.Body.Raw)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(read.Body.Raw)
}

// attachment answers the decoded content of the index-th attachment (from
// 0, as in body.attachments), always as a download. It reads the raw
// source only as far as that attachment and streams its content.
func (a *API) attachment(w http.ResponseWriter, r *http.Request) {
	v := newValidationError()
	index, ok := parseInt(mux.Vars(r)["index"], "index", 0, 1<<20, v)
	if _, idOK := emailID(w, r); !idOK {
		return
	}
	if !ok {
		writeValidation(w, v)
		return
	}
	read, ctx, done, ok := a.openRead(w, r, false)
	if !ok {
		return
	}
	defer done()
	defer read.Close()
	n, found := bodies.ServeAttachment(ctx, w, read.Body.Raw, int(index))
	if !found {
		if ctx.Err() != nil {
			writeError(w, r, a.log, ended(ctx.Err()))
			return
		}
		writeMessage(w, http.StatusNotFound, fmt.Sprintf("attachment not found: the email has %d attachments", n))
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
