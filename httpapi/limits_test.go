package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
)

func TestWrongKeysAreRateLimited(t *testing.T) {
	t.Parallel()
	forEachBackendWith(t, func(c *config.Config) {
		c.HTTP.AuthFailuresPerMinute = 3
		c.HTTP.AuthLimitLoopback = true
	}, func(t *testing.T, e *testenv.Env) {
		// Missing keys do not count; wrong and unknown keys do.
		for range 5 {
			wantError(t, get(t, e, "/v1/emails", ""), http.StatusUnauthorized)
		}
		list(t, e, acme, "")
		for range 3 {
			wantError(t, get(t, e, "/v1/emails", "guess"), http.StatusUnauthorized)
		}
		resp := get(t, e, "/v1/emails", "guess")
		wantError(t, resp, http.StatusTooManyRequests)
		if resp.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
		// A key that worked from this address before goes on; any other
		// key, right or wrong, is refused alike until the window ends, so a
		// guess learns nothing from the answer.
		list(t, e, acme, "")
		wantError(t, get(t, e, "/v1/emails", globex), http.StatusTooManyRequests)
		wantError(t, get(t, e, "/v1/emails", "other-guess"), http.StatusTooManyRequests)
		if resp := get(t, e, "/healthz", ""); resp.Status != http.StatusOK {
			t.Errorf("healthz: %d", resp.Status)
		}
	})
}

// TestLoopbackIsNotRateLimitedByDefault checks that a test suite on the
// same host can check its 401s as often as it likes.
func TestLoopbackIsNotRateLimitedByDefault(t *testing.T) {
	t.Parallel()
	forEachBackendWith(t, func(c *config.Config) { c.HTTP.AuthFailuresPerMinute = 3 }, func(t *testing.T, e *testenv.Env) {
		for range 10 {
			wantError(t, get(t, e, "/v1/emails", "guess"), http.StatusUnauthorized)
		}
	})
}

func TestDeepJSONIsRefused(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		deep := `{"recipient":"r@acme.test","sender":"s@example.com","x":` + strings.Repeat("[", 33) + strings.Repeat("]", 33) + `}`
		wantValidation(t, e.Do(t, http.MethodPost, "/v1/emails", acme, deep), "")
		ok := `{"recipient":"r@acme.test","sender":"s@example.com","x":` + strings.Repeat("[", 31) + strings.Repeat("]", 31) + `,"subject":"[[[[{{{{"}`
		if resp := e.Do(t, http.MethodPost, "/v1/emails", acme, ok); resp.Status != http.StatusCreated {
			t.Errorf("32 levels (brackets in strings do not count): %d %s", resp.Status, resp.Body)
		}
	})
}

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		for _, resp := range []*testenv.Response{get(t, e, "/healthz", ""), get(t, e, "/v1/emails", acme), get(t, e, "/v1/emails", ""), get(t, e, "/nothing", "")} {
			for name, want := range map[string]string{
				"X-Content-Type-Options":  "nosniff",
				"X-Frame-Options":         "DENY",
				"Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
				"Referrer-Policy":         "no-referrer",
			} {
				if got := resp.Header.Get(name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
		}
	})
}
