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

// body loads the body of the session's account's email named in the path;
// it reports false when it has answered.
func (h *Handler) body(w http.ResponseWriter, r *http.Request) (string, *store.Body, bool) {
	accountID := h.sessionAccount(w, r)
	if accountID == "" {
		return "", nil, false
	}
	id := r.PathValue("id")
	if !store.ValidID(id) {
		writeMessage(w, http.StatusBadRequest, "the email id must be a UUID")
		return "", nil, false
	}
	id = store.NormalizeID(id)
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	body, err := h.cfg.Store.GetBody(ctx, accountID, id)
	switch {
	case store.IsCode(err, store.NotFound):
		writeMessage(w, http.StatusNotFound, "email not found")
		return "", nil, false
	case store.IsCode(err, store.Unavailable):
		writeMessage(w, http.StatusServiceUnavailable, "store unavailable")
		return "", nil, false
	case err != nil:
		h.cfg.Log.Error("dashboard: load body", "err", err)
		writeMessage(w, http.StatusInternalServerError, "internal error")
		return "", nil, false
	}
	return id, body, true
}

// preview answers the email's HTML for the sandboxed preview frame, its
// cid: images pointing at its attachments. ?remote=1 allows remote images.
func (h *Handler) preview(w http.ResponseWriter, r *http.Request) {
	id, body, ok := h.body(w, r)
	if !ok {
		return
	}
	remote := ""
	if r.URL.Query().Get("remote") == "1" {
		remote = " https: http:"
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", fmt.Sprintf(previewCSP, remote))
	hd.Set("X-Frame-Options", "SAMEORIGIN")
	hd.Set("Content-Type", "text/html; charset=utf-8")
	if body.HTML == nil {
		text := "This message has no HTML part."
		if body.Text != nil {
			text = *body.Text
		}
		fmt.Fprintf(w, "<!doctype html><meta charset=utf-8><pre style=\"white-space:pre-wrap;font:14px/1.5 monospace\">%s</pre>", html.EscapeString(text))
		return
	}
	inline := mailparse.ReadAttachments(body.Raw, inlineImages(*body.HTML, body.Attachments))
	w.Write([]byte(rewriteHTML(*body.HTML, id, body.Attachments, inline)))
}

// Bounds of the images a preview carries inline: each, and all together
// (decoded sizes).
const (
	maxInlineImage = 2 << 20
	maxInlineTotal = 8 << 20
)

// inlineImages returns the indexes of the attachments that the HTML shows
// by cid: and that the preview carries inline, as data: URLs: images,
// within maxInlineImage each and maxInlineTotal in all. The frame is
// sandboxed, so its own requests carry no session cookie: an image it
// fetched from the attachment endpoint would not show.
func inlineImages(src string, atts []store.Attachment) map[int]bool {
	index := cidIndex(atts)
	want := map[int]bool{}
	var total int64
	for _, m := range cidRef.FindAllString(src, -1) {
		i, ok := cidTarget(m, index)
		if !ok || want[i] {
			continue
		}
		if _, image := imageType(atts[i]); image && atts[i].Size <= maxInlineImage && total+atts[i].Size <= maxInlineTotal {
			want[i] = true
			total += atts[i].Size
		}
	}
	return want
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
	out := cidRef.ReplaceAllStringFunc(src, func(m string) string {
		i, ok := cidTarget(m, index)
		if !ok {
			return m
		}
		if content, ok := inline[i]; ok {
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
	id, body, ok := h.body(w, r)
	if !ok {
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "message/rfc822")
	hd.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": id + ".eml"}))
	hd.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	hd.Set("Content-Length", strconv.Itoa(len(body.Raw)))
	w.Write(body.Raw)
}

// attachment answers the index-th attachment's decoded content, as a
// download; an <img> still shows an image from it.
func (h *Handler) attachment(w http.ResponseWriter, r *http.Request) {
	index, err := strconv.Atoi(r.PathValue("index"))
	if err != nil || index < 0 || index > 1<<20 {
		writeMessage(w, http.StatusBadRequest, "the attachment index must be a number from 0")
		return
	}
	_, body, ok := h.body(w, r)
	if !ok {
		return
	}
	att, content, found := mailparse.ReadAttachment(body.Raw, index)
	if !found {
		writeMessage(w, http.StatusNotFound, "attachment not found")
		return
	}
	ctype := "application/octet-stream"
	if att.ContentType != nil {
		if mt, params, err := mime.ParseMediaType(*att.ContentType); err == nil {
			ctype = mime.FormatMediaType(mt, params)
		}
	}
	name := "attachment-" + strconv.Itoa(index)
	if att.Filename != nil && *att.Filename != "" {
		name = *att.Filename
	}
	disposition := mime.FormatMediaType("attachment", map[string]string{"filename": name})
	if disposition == "" {
		disposition = "attachment"
	}
	hd := w.Header()
	hd.Set("Content-Type", ctype)
	hd.Set("Content-Disposition", disposition)
	hd.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	hd.Set("Content-Length", strconv.Itoa(len(content)))
	w.Write(content)
}
