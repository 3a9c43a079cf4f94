package web

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"html"
	"io"
	"iter"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/mailsink/mailsink/internal/bodies"
	"github.com/mailsink/mailsink/internal/mailparse"
	"github.com/mailsink/mailsink/store"
)

// previewCSP is the policy of a captured HTML message: no script, form,
// frame, font or remote load, and the sandbox (no scripts, no same origin,
// no navigation of the dashboard, no automatic features such as meta
// refresh) even when opened outside its frame, with only what the frame's
// sandbox allows too: links that open a new tab, itself unsandboxed (the
// sandboxes of the frame and of the policy add up). Only the dashboard may
// frame it. With remote images allowed, img-src also takes http: and https:.
const previewCSP = "default-src 'none'; img-src 'self' data:%s; style-src 'unsafe-inline'; form-action 'none'; " +
	"frame-src 'none'; base-uri 'none'; frame-ancestors 'self'; sandbox allow-popups allow-popups-to-escape-sandbox"

// refreshRef finds http-equiv attributes: the sandbox already blocks meta
// refresh, and renaming the attribute makes sure no browser follows it.
var refreshRef = regexp.MustCompile(`(?i)\bhttp-equiv\s*=`)

// linkRef finds <link> elements. Their stylesheets are blocked by the CSP,
// but Chromium fetches rel=prefetch links whenever img-src allows the host
// (with remote images on), so they are renamed into inert elements.
var linkRef = regexp.MustCompile(`(?i)<link\b`)

// open opens the email named in the path, of the account the path names,
// parsed or not, when the request carries that account's session; it
// reports false when it has answered, with fail. The caller closes the
// read and calls done.
func (h *Handler) open(w http.ResponseWriter, r *http.Request, parsed bool, fail failure) (read *bodies.Read, ctx context.Context, done func(), ok bool) {
	accountID := h.sessionAccount(w, r, fail)
	if accountID == "" {
		return nil, nil, nil, false
	}
	id := r.PathValue("id")
	if !store.ValidID(id) {
		fail(w, http.StatusBadRequest, "the email id must be a UUID")
		return nil, nil, nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	open := h.cfg.Bodies.Raw
	if parsed {
		open = h.cfg.Bodies.Parsed
	}
	read, err := open(ctx, accountID, store.NormalizeID(id))
	if err != nil {
		cancel()
		h.writeError(w, err, fail)
		return nil, nil, nil, false
	}
	return read, ctx, cancel, true
}

// writeError answers an error of the bodies service with fail.
func (h *Handler) writeError(w http.ResponseWriter, err error, fail failure) {
	switch {
	case store.IsCode(err, store.NotFound):
		fail(w, http.StatusNotFound, "email not found: it may have been deleted")
	case store.IsCode(err, store.Busy):
		w.Header().Set("Retry-After", "2")
		fail(w, http.StatusServiceUnavailable, "busy: too many large emails are being read at once, try again in a moment")
	case store.IsCode(err, store.Unavailable):
		fail(w, http.StatusServiceUnavailable, "store unavailable: try again in a moment")
	default:
		h.cfg.Log.Error("dashboard: read an email", "err", err)
		fail(w, http.StatusInternalServerError, "internal error")
	}
}

// previewFailed answers the preview frame's request with a page of
// mailsink's own that says what went wrong: an answer the frame may not
// show (the page's own frame-ancestors 'none') would read as the
// browser's "refused to connect".
func previewFailed(w http.ResponseWriter, status int, msg string) {
	if status == http.StatusUnauthorized {
		msg = "The dashboard's session has ended. Open the message again: the dashboard signs in again by itself."
	}
	setPreviewHeaders(w, "")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<!doctype html><meta charset=utf-8><title>mailsink</title>`+
		`<div style="font:15px/1.5 system-ui,sans-serif;color:#1a1d23;padding:2rem 1rem;text-align:center">`+
		`<p style="font-weight:600;margin:0 0 .5rem">mailsink could not show this message</p>`+
		`<p id="mailsink-error" style="margin:0;color:#5b6270">%s</p></div>`, html.EscapeString(upperFirst(msg)))
}

// upperFirst returns s with its first letter in upper case.
func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// preview answers the email's HTML for the sandboxed preview frame: its
// links rewritten (links.go), its cid: images pointing at its attachments.
// ?remote=1 allows remote images. Errors are pages the frame shows.
func (h *Handler) preview(w http.ResponseWriter, r *http.Request) {
	read, ctx, done, ok := h.open(w, r, true, previewFailed)
	if !ok {
		return
	}
	defer done()
	defer read.Close()
	body := read.Body
	remote := ""
	if r.URL.Query().Get("remote") == "1" {
		remote = " https: http:"
	}
	if body.HTML == nil {
		setPreviewHeaders(w, remote)
		text := "This message has no HTML part."
		if body.Text != nil {
			text = *body.Text
		}
		fmt.Fprintf(w, "<!doctype html><meta charset=utf-8><pre style=\"white-space:pre-wrap;font:14px/1.5 monospace\">%s</pre>", html.EscapeString(text))
		return
	}
	// In memory: two copies of the HTML (disarmed, then with its links
	// rewritten), the images decoded and their base64 forms. The answer
	// itself is written as it is made.
	if err := read.Grow(ctx, 2*int64(len(*body.HTML))); err != nil {
		h.writeError(w, err, previewFailed)
		return
	}
	var linked strings.Builder
	linked.Grow(len(*body.HTML) + len(*body.HTML)/8)
	rewriteLinks(&linked, disarm(*body.HTML))
	src := linked.String()
	want, total := inlineImages(src, body.Attachments)
	if err := read.Grow(ctx, total+total*4/3); err != nil {
		h.writeError(w, err, previewFailed)
		return
	}
	inline := mailparse.ReadAttachments(ctx, body.Raw, want)
	if ctx.Err() != nil {
		h.writeError(w, store.Wrap(store.Unavailable, ctx.Err(), "the preview took too long"), previewFailed)
		return
	}
	setPreviewHeaders(w, remote)
	bw := bufio.NewWriterSize(w, 32<<10)
	rewriteHTML(bw, src, accountBase(read.Email.AccountID)+"emails/"+read.Email.ID+"/attachments/", body.Attachments, inline)
	bw.Flush()
}

// setPreviewHeaders sets the headers of a captured message's preview.
func setPreviewHeaders(w http.ResponseWriter, remote string) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", fmt.Sprintf(previewCSP, remote))
	hd.Set("X-Frame-Options", "SAMEORIGIN")
	hd.Set("Content-Type", "text/html; charset=utf-8")
}

// Bounds of the images a preview carries inline (decoded sizes): each,
// and all together, counted over every reference, since each reference
// carries its own copy.
const (
	maxInlineImage = 2 << 20
	maxInlineTotal = 8 << 20
)

// inlineImages returns the indexes of the attachments that the HTML shows
// by cid: and that the preview carries inline, as data: URLs, and their
// total decoded size: images within maxInlineImage each and maxInlineTotal
// in all. The frame is sandboxed, so its own requests carry no session
// cookie: an image it fetched from the attachment endpoint would not show.
// rewriteHTML spends the same total over the references in order, so an
// image referenced again after the total is spent is not inlined again.
func inlineImages(src string, atts []store.Attachment) (map[int]bool, int64) {
	index := cidIndex(atts)
	image := make([]bool, len(atts))
	for i, a := range atts {
		_, image[i] = imageType(a)
	}
	want := map[int]bool{}
	var total int64
	for start, end := range cidRefs(src) {
		i, ok := cidTarget(src[start:end], index)
		if !ok || !image[i] || atts[i].Size > maxInlineImage || total+atts[i].Size > maxInlineTotal {
			continue
		}
		want[i] = true
		total += atts[i].Size
	}
	return want, total
}

// cidRefs yields the start and end of each cid: URL (RFC 2392) in src, in
// order: "cid:" in any case, not right after a letter, digit or
// underscore, then the bytes up to white space, a quote, a parenthesis, an
// angle bracket or a backslash (at least one). These are the matches of
// (?i)\bcid:[^\s"'()<>\\]+ (preview_test.go checks it), found by
// looking only at the colons: the regular expression offers the engine no
// literal to skip to, and took about 0.7 s of CPU for each pass over the
// 25 MB HTML part of the preview image bomb (docs/benchmarks.md, "Reads
// of hostile messages").
func cidRefs(src string) iter.Seq2[int, int] {
	return func(yield func(start, end int) bool) {
		for i := 0; i < len(src); {
			colon := strings.IndexByte(src[i:], ':')
			if colon < 0 {
				return
			}
			colon += i
			i = colon + 1
			start := colon - len("cid")
			if start < 0 || src[start]|0x20 != 'c' || src[start+1]|0x20 != 'i' || src[start+2]|0x20 != 'd' ||
				start > 0 && isWordByte(src[start-1]) {
				continue
			}
			end := i
			for end < len(src) && !cidStop[src[end]] {
				end++
			}
			if end == i {
				continue
			}
			if !yield(start, end) {
				return
			}
			i = end
		}
	}
}

// cidStop holds the bytes that end a cid: URL.
var cidStop = [256]bool{'\t': true, '\n': true, '\f': true, '\r': true, ' ': true, '"': true, '\'': true,
	'(': true, ')': true, '<': true, '>': true, '\\': true}

// isWordByte reports whether c is an ASCII letter, digit or underscore.
func isWordByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

// imageType returns the attachment's media type, without parameters, and
// whether it is an image type fit for a data: URL.
func imageType(a store.Attachment) (string, bool) {
	if a.ContentType == nil {
		return "", false
	}
	mt, _, err := mime.ParseMediaType(*a.ContentType)
	sub, ok := strings.CutPrefix(mt, "image/")
	if err != nil || !ok || sub == "" || strings.IndexFunc(sub, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '+' || r == '-')
	}) >= 0 {
		return "", false
	}
	return mt, true
}

// cidIndex maps the attachments' Content-IDs, lower case and without
// angle brackets, to their indexes; the first of a repeated id wins.
func cidIndex(atts []store.Attachment) map[string]int {
	index := map[string]int{}
	for i, a := range atts {
		if a.ContentID != nil {
			cid := strings.ToLower(strings.Trim(strings.TrimSpace(*a.ContentID), "<>"))
			if _, dup := index[cid]; !dup {
				index[cid] = i
			}
		}
	}
	return index
}

// cidTarget returns the index of the attachment a cid: URL m names.
func cidTarget(m string, index map[string]int) (int, bool) {
	ref := m[len("cid:"):]
	if u, err := url.PathUnescape(ref); err == nil {
		ref = u
	}
	i, ok := index[strings.ToLower(ref)]
	return i, ok
}

// disarm renames http-equiv attributes and <link> elements of a message's
// HTML. It runs before the cid: URLs are rewritten (rewriteHTML), which
// brings in neither and can make the HTML several times longer.
func disarm(src string) string {
	src = refreshRef.ReplaceAllString(src, "data-blocked-http-equiv=")
	return linkRef.ReplaceAllString(src, "<blocked-link")
}

// rewriteHTML writes src to w with its cid: URLs pointing at the images in
// inline, as data: URLs, or else at the dashboard's attachment endpoint,
// attachments followed by the index. The frame's CSP and sandbox are what
// make the HTML harmless; this only makes inline images show.
func rewriteHTML(w io.Writer, src, attachments string, atts []store.Attachment, inline map[int][]byte) {
	index := cidIndex(atts)
	dataURLs := map[int]string{} // each inline image encoded once
	var total int64              // decoded bytes inlined so far, over every reference
	last := 0
	for start, end := range cidRefs(src) {
		i, ok := cidTarget(src[start:end], index)
		if !ok {
			continue
		}
		io.WriteString(w, src[last:start])
		last = end
		if content, ok := inline[i]; ok && total+int64(len(content)) <= maxInlineTotal {
			total += int64(len(content))
			if _, ok := dataURLs[i]; !ok {
				mt, _ := imageType(atts[i])
				dataURLs[i] = "data:" + mt + ";base64," + base64.StdEncoding.EncodeToString(content)
			}
			io.WriteString(w, dataURLs[i])
			continue
		}
		io.WriteString(w, attachments+strconv.Itoa(i))
	}
	io.WriteString(w, src[last:])
}

// raw answers the raw source as a download.
func (h *Handler) raw(w http.ResponseWriter, r *http.Request) {
	read, _, done, ok := h.open(w, r, false, writeMessage)
	if !ok {
		return
	}
	defer done()
	defer read.Close()
	hd := w.Header()
	hd.Set("Content-Type", "message/rfc822")
	hd.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": read.Email.ID + ".eml"}))
	hd.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	hd.Set("Content-Length", strconv.Itoa(len(read.Body.Raw)))
	w.Write(read.Body.Raw)
}

// attachment answers the index-th attachment's decoded content, as a
// download, streamed; an <img> still shows an image from it.
func (h *Handler) attachment(w http.ResponseWriter, r *http.Request) {
	index, err := strconv.Atoi(r.PathValue("index"))
	if err != nil || index < 0 || index > 1<<20 {
		writeMessage(w, http.StatusBadRequest, "the attachment index must be a number from 0")
		return
	}
	read, ctx, done, ok := h.open(w, r, false, writeMessage)
	if !ok {
		return
	}
	defer done()
	defer read.Close()
	if _, found := bodies.ServeAttachment(ctx, w, read.Body.Raw, index); !found {
		writeMessage(w, http.StatusNotFound, "attachment not found")
	}
}
