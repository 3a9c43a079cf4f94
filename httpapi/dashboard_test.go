package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/accounts"
	"github.com/mailsink/mailsink/internal/ingest"
	"github.com/mailsink/mailsink/store/pebblestore"
)

// The dashboard's handler gets / and everything under /ui/, and its own
// security headers replace the API's; the API's paths stay the API's.
func TestDashboardRoutes(t *testing.T) {
	st, err := pebblestore.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dashboard := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'")
		w.Header().Set("X-Frame-Options", "SAMEORIGIN")
		io.WriteString(w, "dashboard "+r.Method+" "+r.URL.Path)
	})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	with := New(Config{Dashboard: dashboard}, st, accounts.New(nil), ingest.New(st, time.Now, ingest.Config{}), log, time.Now)
	without := New(Config{}, st, accounts.New(nil), ingest.New(st, time.Now, ingest.Config{}), log, time.Now)

	for _, tc := range []struct {
		api          *API
		method, path string
		status       int
		body, csp    string
	}{
		{with, "GET", "/", 200, "dashboard GET /", "default-src 'self'"},
		{with, "GET", "/ui/app.js", 200, "dashboard GET /ui/app.js", "default-src 'self'"},
		{with, "POST", "/ui/session", 200, "dashboard POST /ui/session", "default-src 'self'"},
		{with, "GET", "/v1/emails", 401, "", "default-src 'none'; frame-ancestors 'none'"},
		{with, "GET", "/healthz", 200, "", "default-src 'none'; frame-ancestors 'none'"},
		{with, "GET", "/elsewhere", 404, "", "default-src 'none'; frame-ancestors 'none'"},
		{without, "GET", "/", 404, "", "default-src 'none'; frame-ancestors 'none'"},
		{without, "GET", "/ui/app.js", 404, "", "default-src 'none'; frame-ancestors 'none'"},
	} {
		w := httptest.NewRecorder()
		tc.api.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
		if w.Code != tc.status || (tc.body != "" && w.Body.String() != tc.body) || w.Header().Get("Content-Security-Policy") != tc.csp {
			t.Errorf("%s %s: %d %q, CSP %q; want %d %q, CSP %q", tc.method, tc.path, w.Code, w.Body, w.Header().Get("Content-Security-Policy"), tc.status, tc.body, tc.csp)
		}
	}
}
