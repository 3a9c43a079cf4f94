// Package web serves mailsink's dashboard: a page at / and its assets under
// /ui/, plain ES modules and CSS embedded in the binary. The dashboard is a
// client of the public /v1 API, sending the API key in the Authorization
// header from the browser. What a header cannot carry (the sandboxed HTML
// preview, downloads) uses a session cookie of the account, minted by POST
// /ui/session with the key in the Authorization header, and read under
// /ui/a/<account>/ (session.go); the endpoints that accept the cookie only
// read. Links clicked in the preview open in a new tab, some through a
// page that asks first (links.go).
package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/mailsink/mailsink/internal/accounts"
	"github.com/mailsink/mailsink/internal/authlimit"
	"github.com/mailsink/mailsink/internal/bodies"
	"github.com/mailsink/mailsink/store"
)

//go:embed assets
var assets embed.FS

// Prefix is the path under which the dashboard's assets and its cookie
// endpoints live; the page itself is at /.
const Prefix = "/ui/"

// pageCSP is the dashboard page's policy: its own scripts, styles and API
// only, the preview frame from its own origin, and no framing of the page.
const pageCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Config is what the dashboard needs from the rest of mailsink.
type Config struct {
	// Bodies reads the emails' content for the preview and the downloads.
	Bodies   *bodies.Service
	Accounts *accounts.Registry
	// AuthLimiter, when not nil, counts wrong keys sent to POST /ui/session
	// in the same budget as the API's.
	AuthLimiter *authlimit.Limiter
	Log         *slog.Logger
	// SessionTTL is how long a session cookie works; 12 hours when zero.
	SessionTTL time.Duration
	// Sessions keeps dashboard sessions where every process serving the
	// store finds them.
	Sessions store.Sessions
	// MarkRead tells the page that opening a message marks it read
	// (MAILSINK_DASHBOARD_MARK_READ).
	MarkRead bool
}

// Handler serves the dashboard.
type Handler struct {
	cfg      Config
	files    map[string]*asset
	sessions *sessions
	mux      *http.ServeMux
}

// asset is one embedded file, also gzip-compressed when that is smaller.
type asset struct {
	name        string
	contentType string
	plain, gz   []byte
	etag        string
}

// New returns the dashboard's handler.
func New(cfg Config) *Handler {
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{cfg: cfg, files: loadAssets(cfg.MarkRead), sessions: newSessions(cfg.SessionTTL, cfg.Sessions)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.page)
	mux.HandleFunc("POST /ui/session", h.signIn)
	mux.HandleFunc("GET /ui/a/{account}/session", h.checkSession)
	mux.HandleFunc("DELETE /ui/a/{account}/session", h.signOut)
	mux.HandleFunc("GET /ui/a/{account}/preview/{id}", h.preview)
	mux.HandleFunc("GET /ui/a/{account}/emails/{id}/raw", h.raw)
	mux.HandleFunc("GET /ui/a/{account}/emails/{id}/attachments/{index}", h.attachment)
	mux.HandleFunc("GET /ui/away", h.away)
	mux.HandleFunc("GET /ui/{file}", h.static)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeMessage(w, http.StatusNotFound, "not found")
	})
	h.mux = mux
	return h
}

// ServeHTTP serves the page, the assets and the cookie endpoints. Each
// answer sets its own Content-Security-Policy and frame options, replacing
// whatever a middleware set before.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", pageCSP)
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	h.mux.ServeHTTP(w, r)
}

// SignInURL is the dashboard's address with key in the fragment, which a
// browser never sends to the server; the page signs in with it and removes
// it from the address bar at once. base is the HTTP listener's address,
// like http://127.0.0.1:8025.
func SignInURL(base, key string) string {
	return strings.TrimRight(base, "/") + "/#" + url.Values{"key": {key}}.Encode()
}

// markReadMeta is the page's setting of MAILSINK_DASHBOARD_MARK_READ, as
// index.html carries it.
const markReadMeta = `<meta name="mailsink-mark-read" content="true">`

// loadAssets reads the embedded files, with the page's mark-read setting.
func loadAssets(markRead bool) map[string]*asset {
	files := map[string]*asset{}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		if path.Base(p) == "index.html" && !markRead {
			data = bytes.Replace(data, []byte(markReadMeta), []byte(strings.Replace(markReadMeta, "true", "false", 1)), 1)
		}
		sum := sha256.Sum256(data)
		a := &asset{name: path.Base(p), contentType: contentType(p), plain: data, etag: hex.EncodeToString(sum[:8])}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(data)
		zw.Close()
		if buf.Len() < len(data) {
			a.gz = buf.Bytes()
		}
		files[a.name] = a
		return nil
	})
	if err != nil {
		panic("web: embedded assets: " + err.Error()) // the binary was built wrong
	}
	return files
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/octet-stream"
}

// CompressedSize returns the bytes a browser downloads for the whole
// dashboard when it accepts gzip.
func (h *Handler) CompressedSize() int {
	n := 0
	for _, a := range h.files {
		if a.gz != nil {
			n += len(a.gz)
		} else {
			n += len(a.plain)
		}
	}
	return n
}

func (h *Handler) page(w http.ResponseWriter, r *http.Request) {
	h.serveAsset(w, r, h.files["index.html"])
}

func (h *Handler) static(w http.ResponseWriter, r *http.Request) {
	a := h.files[r.PathValue("file")]
	if a == nil || a.name == "index.html" {
		writeMessage(w, http.StatusNotFound, "not found")
		return
	}
	h.serveAsset(w, r, a)
}

// serveAsset answers a, gzip-compressed when the client accepts it; the
// browser revalidates it each time by its ETag, so a new binary's assets
// are never mixed with an old page.
func (h *Handler) serveAsset(w http.ResponseWriter, r *http.Request, a *asset) {
	hd := w.Header()
	hd.Set("Content-Type", a.contentType)
	hd.Set("Cache-Control", "no-cache")
	hd.Set("Vary", "Accept-Encoding")
	body, etag := a.plain, `"`+a.etag+`"`
	if a.gz != nil && acceptsGzip(r) {
		body, etag = a.gz, `"`+a.etag+`-gz"`
		hd.Set("Content-Encoding", "gzip")
	}
	hd.Set("ETag", etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") && strings.ReplaceAll(params, " ", "") != "q=0" {
			return true
		}
	}
	return false
}

// writeMessage answers the API's error envelope.
func writeMessage(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
