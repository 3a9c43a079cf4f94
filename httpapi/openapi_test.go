package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/api"
	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
)

// openAPI is the served OpenAPI document, to check answers against.
type openAPI struct{ *testenv.OpenAPI }

func loadOpenAPI(t *testing.T, e *testenv.Env) *openAPI {
	t.Helper()
	resp := get(t, e, "/v1/openapi.json", "")
	if resp.Status != http.StatusOK {
		t.Fatalf("openapi.json without a key: %d", resp.Status)
	}
	if !bytes.Equal(resp.Body, api.OpenAPIJSON()) {
		t.Fatal("/v1/openapi.json is not api/openapi.yaml")
	}
	o := &openAPI{testenv.NewOpenAPI(t, resp.Body)}
	if o.Doc["openapi"] != "3.1.0" || o.Doc["info"].(map[string]any)["version"] != "1.0.0" {
		t.Fatalf("openapi %v, info.version %v; want 3.1.0 and 1.0.0", o.Doc["openapi"], o.Doc["info"])
	}
	return o
}

// check validates resp, the answer to method on the documented path
// template, against the document (testenv.OpenAPI.Check).
func (o *openAPI) check(t *testing.T, method, template string, resp *testenv.Response) {
	t.Helper()
	o.Check(t, method, template, resp)
}

// TestOpenAPIDescribesTheAnswers sends a request to every documented
// operation, on its happy path and its error paths, and checks each answer
// against the served document; every documented operation must be
// exercised, so the document cannot drift from the routes.
func TestOpenAPIDescribesTheAnswers(t *testing.T) {
	t.Parallel()
	edit, checkProviders := providerChecks(t)
	editChecks := checksForOpenAPI(t)
	up := testenv.StartUpstream(t)
	withRelay := testenv.WithRelay(t, "acme", up.Relay(config.RelayNone, allowAcme))
	forEachBackendWith(t, func(c *config.Config) { edit(c); withRelay(c); editChecks(c) }, func(t *testing.T, e *testenv.Env) {
		o := loadOpenAPI(t, e)
		do := func(method, path, key string, body any) *testenv.Response { return e.Do(t, method, path, key, body) }
		const emails, one = "/v1/emails", "/v1/emails/{emailId}"
		missing := "/v1/emails/0190b6d2-7c3e-7a1b-8c2d-1234567890ab"

		created := do(http.MethodPost, emails, acme, map[string]any{"recipient": "oa@acme.test", "sender": "app@example.com", "raw": withAttachment})
		o.check(t, "POST", emails, created)
		id := created.JSON(t)["item"].(map[string]any)["id"].(string)
		o.check(t, "POST", emails, do(http.MethodPost, emails, acme, map[string]any{"recipient": "oa@acme.test", "sender": "app@example.com", "subject": "plain", "text": "hi"}))
		o.check(t, "POST", emails, do(http.MethodPost, emails, acme, map[string]any{"recipient": "nope"}))
		o.check(t, "POST", emails, do(http.MethodPost, emails, "", map[string]any{}))

		o.check(t, "GET", emails, do(http.MethodGet, emails+"?recipient=oa%40acme.test", acme, nil))
		o.check(t, "GET", emails, do(http.MethodGet, emails+"?limit=0", acme, nil))
		o.check(t, "GET", emails, do(http.MethodGet, emails, "wrong", nil))
		o.check(t, "GET", emails, do(http.MethodGet, emails+"?wait=1&subject=never", acme, nil))
		o.check(t, "GET", emails, do(http.MethodGet, emails+"?label=a&before="+id, acme, nil))
		o.check(t, "GET", emails, do(http.MethodGet, emails+"?before=nope", acme, nil))
		o.check(t, "GET", emails, do(http.MethodGet, emails+"?before=0190b6d2-7c3e-7a1b-8c2d-1234567890ab", acme, nil))

		const count = "/v1/emails/count"
		o.check(t, "GET", count, do(http.MethodGet, count+"?status=received", acme, nil))
		o.check(t, "GET", count, do(http.MethodGet, count+"?label=", acme, nil))
		o.check(t, "GET", count, do(http.MethodGet, count+"?before=0190b6d2-7c3e-7a1b-8c2d-1234567890ab", acme, nil))
		o.check(t, "GET", count, do(http.MethodGet, count, "", nil))
		o.check(t, "GET", count, do(http.MethodGet, count+"?q=is%3Aunread", acme, nil))
		o.check(t, "GET", emails, do(http.MethodGet, emails+"?q=subject%3Aplain+-is%3Aread", acme, nil))
		o.check(t, "GET", emails, do(http.MethodGet, emails+"?q=status%3Anew", acme, nil))

		const stats = "/v1/emails/stats"
		o.check(t, "GET", stats, do(http.MethodGet, stats, acme, nil))
		o.check(t, "GET", stats, do(http.MethodGet, stats+"?x=1", acme, nil))
		o.check(t, "GET", stats, do(http.MethodGet, stats, "", nil))

		o.check(t, "GET", one, do(http.MethodGet, "/v1/emails/"+id, acme, nil))
		o.check(t, "GET", one, do(http.MethodGet, "/v1/emails/xyz", acme, nil))
		o.check(t, "GET", one, do(http.MethodGet, missing, acme, nil))
		o.check(t, "PATCH", one, do(http.MethodPatch, "/v1/emails/"+id, acme, map[string]any{"labels": []string{"a"}, "notes": nil}))
		o.check(t, "PATCH", one, do(http.MethodPatch, "/v1/emails/"+id, acme, map[string]any{"status": "gone"}))
		o.check(t, "PATCH", one, do(http.MethodPatch, "/v1/emails/"+id, acme, map[string]any{"read": true}))
		o.check(t, "PATCH", one, do(http.MethodPatch, missing, acme, map[string]any{}))

		o.check(t, "GET", one+"/links", get(t, e, "/v1/emails/"+id+"/links", acme))
		linked := do(http.MethodPost, emails, acme, map[string]any{"recipient": "oa@acme.test", "sender": "app@example.com",
			"html": `<a href="https://acme.test/a">A</a><a href="mailto:x@acme.test"></a>`, "text": "https://acme.test/b"})
		linksResp := get(t, e, "/v1/emails/"+linked.JSON(t)["item"].(map[string]any)["id"].(string)+"/links", acme)
		if n := len(linksResp.JSON(t)["items"].([]any)); n != 3 {
			t.Errorf("links: %d items, want 3: %s", n, linksResp.Body)
		}
		o.check(t, "GET", one+"/links", linksResp)
		o.check(t, "GET", one+"/links", get(t, e, "/v1/emails/x/links", acme))
		o.check(t, "GET", one+"/links", get(t, e, missing+"/links", acme))
		coded := do(http.MethodPost, emails, acme, map[string]any{"recipient": "oa@acme.test", "sender": "app@example.com",
			"subject": "Your code: 123 456"})
		codesResp := get(t, e, "/v1/emails/"+coded.JSON(t)["item"].(map[string]any)["id"].(string)+"/codes", acme)
		if n := len(codesResp.JSON(t)["items"].([]any)); n != 1 {
			t.Errorf("codes: %d items, want 1: %s", n, codesResp.Body)
		}
		o.check(t, "GET", one+"/codes", codesResp)
		o.check(t, "GET", one+"/codes", get(t, e, "/v1/emails/"+id+"/codes", acme))
		o.check(t, "GET", one+"/codes", get(t, e, "/v1/emails/x/codes", acme))
		o.check(t, "GET", one+"/codes", get(t, e, missing+"/codes", acme))
		o.check(t, "GET", one+"/raw", get(t, e, "/v1/emails/"+id+"/raw", acme))
		o.check(t, "GET", one+"/raw", get(t, e, missing+"/raw", acme))
		o.check(t, "GET", one+"/attachments/{index}", get(t, e, "/v1/emails/"+id+"/attachments/0", acme))
		o.check(t, "GET", one+"/attachments/{index}", get(t, e, "/v1/emails/"+id+"/attachments/9", acme))
		o.check(t, "GET", one+"/attachments/{index}", get(t, e, "/v1/emails/"+id+"/attachments/z", acme))

		o.check(t, "GET", one+"/transcript", get(t, e, "/v1/emails/"+id+"/transcript", acme))
		sendSMTP(t, e.SMTP, "app@example.com", "ot@acme.test", "From: app@example.com\r\nSubject: t\r\n\r\nhi\r\n")
		smtpID := list(t, e, acme, "recipient=ot%40acme.test")[0]["id"].(string)
		o.check(t, "GET", one+"/transcript", get(t, e, "/v1/emails/"+smtpID+"/transcript", acme))
		o.check(t, "GET", one+"/transcript", get(t, e, "/v1/emails/x/transcript", acme))
		o.check(t, "GET", one+"/transcript", get(t, e, missing+"/transcript", acme))
		exerciseChecks(t, e, o, id, smtpID, missing)

		const faultsPath = "/v1/faults"
		rule := do(http.MethodPost, faultsPath, acme, map[string]any{"stage": "data", "recipient": "a@acme.test", "count": 2,
			"delay": "1s", "expiresIn": "1h", "probability": 1, "reply": map[string]any{"code": 451, "text": "4.3.0 Try later"}})
		o.check(t, "POST", faultsPath, rule)
		o.check(t, "POST", faultsPath, do(http.MethodPost, faultsPath, acme, map[string]any{"stage": "rcpt", "disconnect": true}))
		o.check(t, "POST", faultsPath, do(http.MethodPost, faultsPath, acme, map[string]any{"stage": "helo"}))
		o.check(t, "POST", faultsPath, do(http.MethodPost, faultsPath, "", map[string]any{}))
		for range 98 {
			do(http.MethodPost, faultsPath, acme, map[string]any{"stage": "rcpt", "delay": "1s"})
		}
		o.check(t, "POST", faultsPath, do(http.MethodPost, faultsPath, acme, map[string]any{"stage": "rcpt", "delay": "1s"}))
		o.check(t, "GET", faultsPath, do(http.MethodGet, faultsPath, acme, nil))
		o.check(t, "DELETE", faultsPath+"/{faultId}", do(http.MethodDelete, faultsPath+"/"+rule.JSON(t)["item"].(map[string]any)["id"].(string), acme, nil))
		o.check(t, "DELETE", faultsPath+"/{faultId}", do(http.MethodDelete, faultsPath+"/"+rule.JSON(t)["item"].(map[string]any)["id"].(string), acme, nil))
		o.check(t, "DELETE", faultsPath+"/{faultId}", do(http.MethodDelete, faultsPath+"/x", acme, nil))
		o.check(t, "DELETE", faultsPath, do(http.MethodDelete, faultsPath, acme, nil))
		o.check(t, "GET", faultsPath, do(http.MethodGet, faultsPath, acme, nil))

		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.BaseURL+"/v1/events", nil)
		req.Header.Set("X-Api-Key", acme)
		stream, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		o.check(t, "GET", "/v1/events", &testenv.Response{Status: stream.StatusCode, Header: stream.Header, Body: []byte{}})
		cancel()
		stream.Body.Close()
		o.check(t, "GET", "/v1/events", get(t, e, "/v1/events?lastEventId=x", acme))

		inbound := func(key, body string) *testenv.Response {
			req, _ := http.NewRequest(http.MethodPost, e.BaseURL+"/v1/inbound", strings.NewReader(body))
			req.Header.Set("Content-Type", "message/rfc822")
			req.Header.Set("X-Api-Key", key)
			return e.Send(t, req)
		}
		o.check(t, "POST", "/v1/inbound", inbound(acme, "From: a@example.com\r\nTo: in@acme.test, in2@acme.test\r\n\r\nhi\r\n"))
		o.check(t, "POST", "/v1/inbound", inbound(acme, ""))
		o.check(t, "POST", "/v1/inbound", inbound("", "x"))
		checkProviders(t, e, o)
		exerciseRelease(t, e, up, o)

		o.check(t, "DELETE", one, do(http.MethodDelete, "/v1/emails/"+id, acme, nil))
		o.check(t, "DELETE", one, do(http.MethodDelete, "/v1/emails/"+id, acme, nil))
		o.check(t, "DELETE", emails, do(http.MethodDelete, emails, acme, nil))
		o.check(t, "DELETE", emails, do(http.MethodDelete, emails+"?recipient=in%40acme.test", acme, nil))

		o.check(t, "GET", "/healthz", get(t, e, "/healthz", ""))
		o.check(t, "GET", "/readyz", get(t, e, "/readyz", ""))
		o.check(t, "GET", "/readyz/writes", get(t, e, "/readyz/writes", ""))
		o.check(t, "GET", "/tls/certificate.pem", get(t, e, "/tls/certificate.pem", "")) // 404: no certificate
		o.check(t, "GET", "/v1/openapi.json", get(t, e, "/v1/openapi.json", ""))
		exerciseWebhooks(t, e, o)

		for path, item := range o.Doc["paths"].(map[string]any) {
			for method := range item.(map[string]any) {
				if method == "parameters" {
					continue
				}
				if op := strings.ToUpper(method) + " " + path; !o.Exercised(op) {
					t.Errorf("%s is documented but no test request exercised it", op)
				}
			}
		}
	})
}

// exerciseRelease checks the release endpoints' answers: acme releases to
// up, globex has no relay.
func exerciseRelease(t *testing.T, e *testenv.Env, up *testenv.Upstream, o *openAPI) {
	t.Helper()
	const one, bulk = "/v1/emails/{emailId}/release", "/v1/emails/release"
	rcpt := "openapi-" + testenv.RandomHex(4) + "@acme.test"
	id := smtpCapture(t, e, rcpt, captured)
	to := func(addrs ...string) map[string]any { return map[string]any{"to": addrs} }
	path := "/v1/emails/" + id + "/release"
	o.check(t, "POST", one, e.Do(t, http.MethodPost, path, acme, to("released@acme.test")))
	o.check(t, "POST", one, e.Do(t, http.MethodPost, path, acme, to("someone@example.com")))
	o.check(t, "POST", one, e.Do(t, http.MethodPost, "/v1/emails/0190b6d2-7c3e-7a1b-8c2d-1234567890ab/release", acme, to("released@acme.test")))
	o.check(t, "POST", one, e.Do(t, http.MethodPost, path, globex, to("released@acme.test")))
	o.check(t, "POST", one, e.Do(t, http.MethodPost, path, "", to("released@acme.test")))
	refused := "refused-" + testenv.RandomHex(4) + "@acme.test"
	if rule := up.Do(t, http.MethodPost, "/v1/faults", testenv.AcmeKey, map[string]any{"stage": "rcpt", "recipient": refused,
		"reply": map[string]any{"code": 550, "text": "5.1.1 No such mailbox"}}); rule.Status != http.StatusCreated {
		t.Fatalf("fault rule: %d %s", rule.Status, rule.Body)
	}
	o.check(t, "POST", one, e.Do(t, http.MethodPost, path, acme, to(refused)))

	o.check(t, "POST", bulk, e.Do(t, http.MethodPost, bulk+"?recipient="+rcpt, acme, to("released@acme.test")))
	o.check(t, "POST", bulk, e.Do(t, http.MethodPost, bulk+"?recipient="+rcpt, acme, to(refused)))
	o.check(t, "POST", bulk, e.Do(t, http.MethodPost, bulk+"?q=x", acme, to("released@acme.test")))
	o.check(t, "POST", bulk, e.Do(t, http.MethodPost, bulk, globex, to("released@acme.test")))
}
