package web

import (
	"context"
	"encoding/base64"
	"fmt"
	"html"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/mailsink/mailsink/internal/bodies"
	"github.com/mailsink/mailsink/mailparse"
	"github.com/mailsink/mailsink/store"
)

// previewCSP is the policy of a captured HTML message: no script, form,
// frame, font or remote load, and the sandbox (no scripts, no same origin,
// no navigation of the dashboard, no automatic features such as meta
// refresh) even when opened outside its frame. Only the dashboard may frame
// it. With remote images allowed, img-src also takes http: and https:.
const previewCSP = "default-src 'none'; img-src 'self' data:%s; style-src 'unsafe-inline'; form-action 'none'; " +
	"frame-src 'none'; base-uri 'none'; frame-ancestors 'self'; sandbox"

// cidRef finds cid: URLs (RFC 2392) in a message's HTML.
var cidRef = regexp.MustCompile(`(?i)\bcid:([^\s"'()<>\\]+)`)

// refreshRef finds http-equiv attributes: the sandbox already blocks meta
// refresh, and renaming the attribute makes sure no browser follows it.
var refreshRef = regexp.MustCompile(`(?i)\bhttp-equiv\s*=`)

// linkRef finds <link> elements. Their stylesheets are blocked by the CSP,
// but Chromium fetches rel=prefetch links whenever img-src allows the host
// (with remote images on), so they are renamed into inert elements.
var linkRef = regexp.MustCompile(`(?i)<link\b`)

// open opens the session's account's email named in the path, parsed or
// not; it reports false when it has answered. The caller closes the read
// and calls done.
func (h *Handler) open(w http.ResponseWriter, r *http.Request, parsed bool) (read *bodies.Read, ctx context.Context, done func(), ok bool) {
	accountID := h.sessionAccount(w, r)
	if accountID == "" {
		return nil, nil, nil, false
	}
	id := r.PathValue("id")
	if !store.ValidID(id) {
		writeMessage(w, http.StatusBadRequest, "the email id must be a UUID")
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
		h.writeError(w, err)
		return nil, nil, nil, false
	}
	return read, ctx, cancel, true
}

// writeError answers an error of the bodies service.
func (h *Handler) writeError(w http.ResponseWriter, err error) {
	switch {
	case store.IsCode(err, store.NotFound):
		writeMessage(w, http.StatusNotFound, "email not found")
	case store.IsCode(err, store.Busy):
		w.Header().Set("Retry-After", "2")
		writeMessage(w, http.StatusServiceUnavailable, "busy: too many large emails are being read at once, try again in a moment")
	case store.IsCode(err, store.Unavailable):
		writeMessage(w, http.StatusServiceUnavailable, "store unavailable")
	default:
		h.cfg.Log.Error("dashboard: read an email", "err", err)
		writeMessage(w, http.StatusInternalServerError, "internal error")
	}
}

// preview answers the email's HTML for the sandboxed preview frame, its
// cid: images pointing at its attachments. ?remote=1 allows remote images.
func (h *Handler) preview(w http.ResponseWriter, r *http.Request) {
	read, ctx, done, ok := h.open(w, r, true)
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
	want, total := inlineImages(*body.HTML, body.Attachments)
	// The answer is the HTML with the images inline: the images decoded,
	// and the HTML with their base64 forms, built in memory.
	if err := read.Grow(ctx, int64(len(*body.HTML))+total+total*4/3); err != nil {
		h.writeError(w, err)
		return
	}
	inline := mailparse.ReadAttachments(ctx, body.Raw, want)
	if ctx.Err() != nil {
		h.writeError(w, store.Wrap(store.Unavailable, ctx.Err(), "the preview took too long"))
		return
	}
	setPreviewHeaders(w, remote)
	w.Write([]byte(rewriteHTML(*body.HTML, read.Email.ID, body.Attachments, inline)))
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
	want := map[int]bool{}
	var total int64
	for _, m := range cidRef.FindAllString(src, -1) {
		i, ok := cidTarget(m, index)
		if !ok {
			continue
		}
		if _, image := imageType(atts[i]); !image || atts[i].Size > maxInlineImage || total+atts[i].Size > maxInlineTotal {
			continue
		}
		want[i] = true
		total += atts[i].Size
	}
	return want, total
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

// rewriteHTML points cid: URLs at the images in inline, as data: URLs, or
// else at the dashboard's attachment endpoint, and disarms http-equiv and
// <link>. The frame's CSP and sandbox are what make the HTML harmless;
// this only makes inline images show.
func rewriteHTML(src, id string, atts []store.Attachment, inline map[int][]byte) string {
	index := cidIndex(atts)
	var total int64 // decoded bytes inlined so far, over every reference
	out := cidRef.ReplaceAllStringFunc(src, func(m string) string {
		i, ok := cidTarget(m, index)
		if !ok {
			return m
		}
		if content, ok := inline[i]; ok && total+int64(len(content)) <= maxInlineTotal {
			total += int64(len(content))
			mt, _ := imageType(atts[i])
			return "data:" + mt + ";base64," + base64.StdEncoding.EncodeToString(content)
		}
		return Prefix + "emails/" + id + "/attachments/" + strconv.Itoa(i)
	})
	out = refreshRef.ReplaceAllString(out, "data-blocked-http-equiv=")
	return linkRef.ReplaceAllString(out, "<blocked-link")
}

// raw answers the raw source as a download.
func (h *Handler) raw(w http.ResponseWriter, r *http.Request) {
	read, _, done, ok := h.open(w, r, false)
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
	read, ctx, done, ok := h.open(w, r, false)
	if !ok {
		return
	}
	defer done()
	defer read.Close()
	if _, found := bodies.ServeAttachment(ctx, w, read.Body.Raw, index); !found {
		writeMessage(w, http.StatusNotFound, "attachment not found")
	}
}
