package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mailsink/mailsink/internal/testenv"
)

// A client may send any token as its HTTP method: the metrics must not keep a
// series for each (before the fix, /metrics grew by every new method name).
func TestUnknownMethodsShareOneMetricSeries(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backends(t)[0], nil)
	m := e.App.Metrics()
	for i := range 50 {
		resp := e.Do(t, fmt.Sprintf("M%dX%s", i, strings.Repeat("Y", 100)), "/x", "", nil)
		if resp.Status < 400 || resp.Status >= 500 {
			t.Fatalf("method %d: status %d, want a 4xx", i, resp.Status)
		}
	}
	if n := testutil.CollectAndCount(m.HTTPRequests); n > 3 {
		t.Errorf("mailsink_http_requests_total has %d series after 50 unknown methods, want at most 3", n)
	}
	if got := testutil.ToFloat64(m.HTTPRequests.WithLabelValues("unmatched", "other", "404")) +
		testutil.ToFloat64(m.HTTPRequests.WithLabelValues("unmatched", "other", "405")); got != 50 {
		t.Errorf("requests counted under method \"other\" = %v, want 50", got)
	}
}

// Header values are strings: null is refused like every other non-string.
func TestCreateRefusesNullHeaderValues(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		resp := e.Do(t, http.MethodPost, "/v1/emails", acme, map[string]any{
			"recipient": "r@acme.test", "sender": "s@example.com", "headers": map[string]any{"x-a": nil},
		})
		if resp.Status != http.StatusBadRequest || !strings.Contains(string(resp.Body), `"headers"`) {
			t.Fatalf("status %d, body %s; want 400 with fieldErrors.headers", resp.Status, resp.Body)
		}
		if items := list(t, e, acme, ""); len(items) != 0 {
			t.Errorf("a refused create stored %d emails", len(items))
		}
	})
}

// receivedAt must have an RFC 3339 form in UTC, or lists would print years
// no parser reads (-0001, 10000) and sort them first.
func TestCreateRefusesReceivedAtOutsideRFC3339Years(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		for _, at := range []string{"0000-01-01T00:00:00+23:59", "9999-12-31T23:59:59.999-23:59"} {
			resp := e.Do(t, http.MethodPost, "/v1/emails", acme, map[string]any{
				"recipient": "r@acme.test", "sender": "s@example.com", "receivedAt": at,
			})
			if resp.Status != http.StatusBadRequest || !strings.Contains(string(resp.Body), `"receivedAt"`) {
				t.Errorf("receivedAt %s: status %d, body %s; want 400 with fieldErrors.receivedAt", at, resp.Status, resp.Body)
			}
		}
		for _, at := range []string{"0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z", "2026-11-22T10:00:00+01:00"} {
			resp := e.Do(t, http.MethodPost, "/v1/emails", acme, map[string]any{
				"recipient": "r@acme.test", "sender": "s@example.com", "receivedAt": at,
			})
			if resp.Status != http.StatusCreated {
				t.Errorf("receivedAt %s: status %d, body %s; want 201", at, resp.Status, resp.Body)
			}
		}
	})
}
