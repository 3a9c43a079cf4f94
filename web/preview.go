package web

import (
	"context"
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
	w.Write([]byte(rewriteHTML(*body.HTML, id, body.Attachments)))
}

// rewriteHTML points cid: URLs at the dashboard's attachment endpoint and
// disarms http-equiv and <link>. The frame's CSP and sandbox are what make the HTML
// harmless; this only makes inline images show.
func rewriteHTML(src, id string, atts []store.Attachment) string {
	index := map[string]int{}
	for i, a := range atts {
		if a.ContentID != nil {
			cid := strings.ToLower(strings.Trim(strings.TrimSpace(*a.ContentID), "<>"))
			if _, dup := index[cid]; !dup {
				index[cid] = i
			}
		}
	}
	out := cidRef.ReplaceAllStringFunc(src, func(m string) string {
		ref := m[len("cid:"):]
		if u, err := url.PathUnescape(ref); err == nil {
			ref = u
		}
		if i, ok := index[strings.ToLower(ref)]; ok {
			return Prefix + "emails/" + id + "/attachments/" + strconv.Itoa(i)
		}
		return m
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
