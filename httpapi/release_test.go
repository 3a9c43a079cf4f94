package httpapi_test

import (
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
)

// allowAcme is a relay's allowedRecipients pattern for every address at
// acme.test.
const allowAcme = `.*@acme\.test`

// captured is a message with what a release must carry exactly: lines
// that start with dots, a line that is one dot, bytes that are not ASCII.
const captured = "From: App <app@example.com>\r\nTo: signup@acme.test\r\nSubject: Welcome\r\n\r\n" +
	"Hello,\r\n.a line that starts with a dot\r\n..two dots\r\n.\r\nCaf\xc3\xa9\r\n"

// withUpstream runs test on every store against a mailsink whose acme
// account releases to a second mailsink (up), with the relay entry that
// relay makes; globex has no relay.
func withUpstream(t *testing.T, relay func(up *testenv.Upstream) string, test func(t *testing.T, e *testenv.Env, up *testenv.Upstream)) {
	t.Helper()
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			up := testenv.StartUpstream(t)
			test(t, testenv.Start(t, b, testenv.WithRelay(t, "acme", relay(up))), up)
		})
	}
}

// smtpCapture sends raw to e over SMTP for recipient and returns the id of
// the email stored.
func smtpCapture(t *testing.T, e *testenv.Env, recipient, raw string) string {
	t.Helper()
	sendSMTP(t, e.SMTP, "app@example.com", recipient, raw)
	items := list(t, e, acme, "limit=1&recipient="+recipient)
	if len(items) != 1 {
		t.Fatalf("the captured email to %s is not listed", recipient)
	}
	return items[0]["id"].(string)
}

func upstreamConnections(up *testenv.Upstream) float64 {
	return testutil.ToFloat64(up.App.Metrics().SMTPConnections)
}

func TestReleaseSendsTheStoredRawToTheRelay(t *testing.T) {
	t.Parallel()
	withUpstream(t, func(up *testenv.Upstream) string { return up.Relay(config.RelayStartTLS, allowAcme) }, func(t *testing.T, e *testenv.Env, up *testenv.Upstream) {
		id := smtpCapture(t, e, "signup@acme.test", captured)
		stored := e.Do(t, http.MethodGet, "/v1/emails/"+id+"/raw", acme, nil).Body
		before := e.Do(t, http.MethodGet, "/v1/emails/"+id, acme, nil).Body

		resp := e.Do(t, http.MethodPost, "/v1/emails/"+id+"/release", acme, map[string]any{"to": []string{"inbox@acme.test", "Inbox@ACME.test"}})
		if resp.Status != http.StatusOK {
			t.Fatalf("release: %d %s", resp.Status, resp.Body)
		}
		item := resp.JSON(t)["item"].(map[string]any)
		if item["code"] != float64(250) || !strings.HasPrefix(item["text"].(string), "2.0.0 ") {
			t.Errorf("release answered %s, want the upstream's 250 and its text", resp.Body)
		}
		if got := up.Raws(t, "inbox@acme.test"); len(got) != 1 || got[0] != string(stored) {
			t.Errorf("the upstream stored %q, want once the captured raw %q", got, stored)
		}
		if after := e.Do(t, http.MethodGet, "/v1/emails/"+id, acme, nil).Body; string(after) != string(before) {
			t.Errorf("the release changed the email:\n%s\n%s", before, after)
		}
		if !strings.Contains(string(get(t, e, "/metrics", "").Body), `mailsink_releases_total{result="released"} 1`) {
			t.Errorf("/metrics does not count the release")
		}
	})
}

func TestReleaseRefusals(t *testing.T) {
	t.Parallel()
	withUpstream(t, func(up *testenv.Upstream) string { return up.Relay(config.RelayStartTLS, allowAcme) }, func(t *testing.T, e *testenv.Env, up *testenv.Upstream) {
		id := smtpCapture(t, e, "refusals@acme.test", captured)
		before := e.Do(t, http.MethodGet, "/v1/emails/"+id, acme, nil).Body
		release := func(key, id string, body any) *testenv.Response {
			return e.Do(t, http.MethodPost, "/v1/emails/"+id+"/release", key, body)
		}
		to := func(addrs ...string) map[string]any { return map[string]any{"to": addrs} }
		connections := upstreamConnections(up)
		for _, tc := range []struct {
			name   string
			resp   *testenv.Response
			status int
			field  string // the field a 400 names; else a part of the error
		}{
			{"a recipient outside allowedRecipients", release(acme, id, to("ok@acme.test", "someone@example.com")), 400, "to"},
			{"a pattern matches the whole address", release(acme, id, to("x@acme.test.example.com")), 400, "to"},
			{"no to", release(acme, id, map[string]any{}), 400, "to"},
			{"to is not a list", release(acme, id, map[string]any{"to": "a@acme.test"}), 400, "to"},
			{"an address that is not one", release(acme, id, to("not an address")), 400, "to"},
			{"a body that is not JSON", release(acme, id, "{"), 400, ""},
			{"a bad id", release(acme, "nope", to("ok@acme.test")), 400, "emailId"},
			{"an email that is not there", release(acme, "0190b6d2-7c3e-7a1b-8c2d-1234567890ab", to("ok@acme.test")), 404, "not found"},
			{"another account's email", release(globex, id, to("ok@acme.test")), 409, "relay"},
			{"an account without a relay", release(globex, "0190b6d2-7c3e-7a1b-8c2d-1234567890ab", to("ok@acme.test")), 409, "has none"},
			{"no key", release("", id, to("ok@acme.test")), 401, "API key"},
		} {
			if tc.resp.Status != tc.status {
				t.Errorf("%s: %d %s, want %d", tc.name, tc.resp.Status, tc.resp.Body, tc.status)
				continue
			}
			body := tc.resp.JSON(t)
			if tc.status == 400 {
				verr, ok := body["error"].(map[string]any)
				if !ok {
					t.Errorf("%s: 400 without the validation envelope: %s", tc.name, tc.resp.Body)
				} else if _, named := verr["fieldErrors"].(map[string]any)[tc.field]; tc.field != "" && !named {
					t.Errorf("%s: %s, want fieldErrors.%s", tc.name, tc.resp.Body, tc.field)
				}
				continue
			}
			if msg, _ := body["error"].(string); !strings.Contains(msg, tc.field) {
				t.Errorf("%s: %s, want an error saying %q", tc.name, tc.resp.Body, tc.field)
			}
		}
		if upstreamConnections(up) != connections {
			t.Errorf("a refused release connected to the upstream")
		}

		// The upstream refuses one of the recipients: 502 with its reply,
		// and the other recipient gets nothing either.
		rule := up.Do(t, http.MethodPost, "/v1/faults", testenv.AcmeKey, map[string]any{"stage": "rcpt", "recipient": "gone@acme.test",
			"reply": map[string]any{"code": 550, "text": "5.1.1 No such mailbox"}})
		if rule.Status != http.StatusCreated {
			t.Fatalf("fault rule: %d %s", rule.Status, rule.Body)
		}
		resp := release(acme, id, to("fine@acme.test", "gone@acme.test"))
		if msg, _ := resp.JSON(t)["error"].(string); resp.Status != http.StatusBadGateway || !strings.Contains(msg, "550 5.1.1 No such mailbox") {
			t.Errorf("the upstream refusing: %d %s, want 502 with its reply", resp.Status, resp.Body)
		}
		if got := up.Raws(t, "fine@acme.test"); len(got) != 0 {
			t.Errorf("a release the upstream refused in part reached %d recipient(s)", len(got))
		}
		if after := e.Do(t, http.MethodGet, "/v1/emails/"+id, acme, nil).Body; string(after) != string(before) {
			t.Errorf("the refused releases changed the email:\n%s\n%s", before, after)
		}
	})
}

func TestReleaseToAnUpstreamThatIsDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	down := fmt.Sprintf(`{host: 127.0.0.1, port: %s, tls: none, allowedRecipients: ['%s']}`, port, allowAcme)
	withUpstream(t, func(*testenv.Upstream) string { return down }, func(t *testing.T, e *testenv.Env, _ *testenv.Upstream) {
		id := smtpCapture(t, e, "down@acme.test", captured)
		before := list(t, e, acme, "")
		resp := e.Do(t, http.MethodPost, "/v1/emails/"+id+"/release", acme, map[string]any{"to": []string{"ok@acme.test"}})
		if msg, _ := resp.JSON(t)["error"].(string); resp.Status != http.StatusBadGateway || !strings.Contains(msg, "127.0.0.1:"+port) {
			t.Errorf("release to an upstream that is down: %d %s, want 502 naming it", resp.Status, resp.Body)
		}
		resp = e.Do(t, http.MethodPost, "/v1/emails/release?recipient=down%40acme.test", acme, map[string]any{"to": []string{"ok@acme.test"}})
		if resp.Status != http.StatusBadGateway {
			t.Errorf("bulk release to an upstream that is down: %d %s, want 502", resp.Status, resp.Body)
		}
		if after := list(t, e, acme, ""); !reflect.DeepEqual(after, before) {
			t.Errorf("the failed releases changed the emails:\n%v\n%v", before, after)
		}
	})
}

func TestBulkRelease(t *testing.T) {
	t.Parallel()
	withUpstream(t, func(up *testenv.Upstream) string { return up.Relay(config.RelayNone, allowAcme) }, func(t *testing.T, e *testenv.Env, up *testenv.Upstream) {
		var ids []string
		for i := range 3 {
			ids = append(ids, smtpCapture(t, e, "bulk@acme.test", strings.Replace(captured, "Welcome", "Welcome "+strconv.Itoa(i), 1)))
		}
		smtpCapture(t, e, "other@acme.test", captured)
		bulk := func(key, query string, to ...string) *testenv.Response {
			return e.Do(t, http.MethodPost, "/v1/emails/release?"+query, key, map[string]any{"to": to})
		}
		resp := bulk(acme, "recipient=bulk%40acme.test&limit=2", "team@acme.test")
		if resp.Status != http.StatusOK {
			t.Fatalf("bulk release: %d %s", resp.Status, resp.Body)
		}
		items := resp.JSON(t)["items"].([]any)
		if len(items) != 2 {
			t.Fatalf("bulk release of limit=2: %d items, want 2: %s", len(items), resp.Body)
		}
		for i, it := range items {
			r := it.(map[string]any)
			if want := ids[2-i]; r["id"] != want || r["released"] != true || r["code"] != float64(250) {
				t.Errorf("item %d: %v, want %s released with 250 (newest first)", i, r, want)
			}
		}
		got := up.Raws(t, "team@acme.test")
		if len(got) != 2 || got[0] != strings.Replace(captured, "Welcome", "Welcome 1", 1) || got[1] != strings.Replace(captured, "Welcome", "Welcome 2", 1) {
			t.Errorf("the upstream stored %q, want the two newest captured raws", got)
		}

		// The next page, by the last id released: the oldest email.
		resp = bulk(acme, "recipient=bulk%40acme.test&before="+ids[1], "team@acme.test")
		if items := resp.JSON(t)["items"].([]any); resp.Status != 200 || len(items) != 1 || items[0].(map[string]any)["id"] != ids[0] {
			t.Errorf("the next page: %d %s, want the oldest email", resp.Status, resp.Body)
		}

		for _, tc := range []struct {
			name   string
			resp   *testenv.Response
			status int
			field  string
		}{
			{"a search mailsink cannot read", bulk(acme, "q=from:", "team@acme.test"), 400, "q"},
			{"wait", bulk(acme, "wait=1", "team@acme.test"), 400, "wait"},
			{"a limit over 100", bulk(acme, "limit=101", "team@acme.test"), 400, "limit"},
			{"a recipient outside allowedRecipients", bulk(acme, "recipient=bulk%40acme.test", "boss@example.com"), 400, "to"},
			{"no recipients", bulk(acme, "recipient=bulk%40acme.test"), 400, "to"},
			{"an account without a relay", bulk(globex, "", "team@acme.test"), 409, ""},
		} {
			if tc.resp.Status != tc.status {
				t.Errorf("%s: %d %s, want %d", tc.name, tc.resp.Status, tc.resp.Body, tc.status)
				continue
			}
			if tc.field != "" {
				if _, named := tc.resp.JSON(t)["error"].(map[string]any)["fieldErrors"].(map[string]any)[tc.field]; !named {
					t.Errorf("%s: %s, want fieldErrors.%s", tc.name, tc.resp.Body, tc.field)
				}
			}
		}
		if got := up.Raws(t, "boss@example.com"); len(got) != 0 {
			t.Errorf("a refused bulk release sent %d emails", len(got))
		}
		resp = bulk(acme, "recipient=nobody%40acme.test", "team@acme.test")
		if items := resp.JSON(t)["items"].([]any); resp.Status != 200 || len(items) != 0 {
			t.Errorf("a bulk release that selects nothing: %d %s, want 200 with no items", resp.Status, resp.Body)
		}
	})
}

func TestReleaseRatePerAccount(t *testing.T) {
	t.Parallel()
	up := testenv.StartUpstream(t)
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			relay := testenv.WithRelay(t, "acme", up.Relay(config.RelayNone, allowAcme))
			e := testenv.Start(t, b, func(c *config.Config) {
				relay(c)
				c.Release.PerMinute = 1
			})
			id := smtpCapture(t, e, "rate@acme.test", captured)
			to := map[string]any{"to": []string{"rate-" + b.Name + "@acme.test"}}
			if resp := e.Do(t, http.MethodPost, "/v1/emails/"+id+"/release", acme, to); resp.Status != http.StatusOK {
				t.Fatalf("the first release of the minute: %d %s", resp.Status, resp.Body)
			}
			for _, path := range []string{"/v1/emails/" + id + "/release", "/v1/emails/release"} {
				resp := e.Do(t, http.MethodPost, path, acme, to)
				wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
				if resp.Status != http.StatusTooManyRequests || wait < 1 || wait > 60 || !strings.Contains(resp.JSON(t)["error"].(string), "MAILSINK_RELEASE_PER_MINUTE") {
					t.Errorf("POST %s past the rate: %d, Retry-After %q, %s; want 429 with a wait of up to 60s", path, resp.Status, resp.Header.Get("Retry-After"), resp.Body)
				}
			}
			if got := up.Raws(t, "rate-"+b.Name+"@acme.test"); len(got) != 1 {
				t.Errorf("the upstream got %d messages, want 1", len(got))
			}
		})
	}
}
