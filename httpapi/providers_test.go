package httpapi_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/inbound"
	"github.com/mailsink/mailsink/internal/inbound/inboundtest"
	"github.com/mailsink/mailsink/internal/testenv"
)

const (
	mailgunKey = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0"
	snsTopic   = "arn:aws:sns:us-east-1:123456789012:inbound-mail"
)

// withInbound gives acme a Mailgun signing key and an SNS topic.
func withInbound(c *config.Config) {
	c.Accounts[0].Inbound = config.AccountInbound{MailgunSigningKey: mailgunKey, SNSTopicArns: []string{snsTopic}}
}

// withSNS returns a test SNS signer and the configuration that accepts
// provider webhooks (withInbound) with the signer's certificate.
func withSNS(t *testing.T) (*inboundtest.SNS, func(*config.Config)) {
	sns := inboundtest.NewSNS(t)
	return sns, func(c *config.Config) {
		withInbound(c)
		c.SNSClient = sns.Client()
	}
}

// postProvider posts body to path with key as a Basic auth password, as a
// provider configured with https://any:KEY@host/... does.
func postProvider(t *testing.T, e *testenv.Env, path, key, contentType string, body []byte, header ...string) *testenv.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if key != "" {
		req.SetBasicAuth("mailgun", key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return e.Send(t, req)
}

// wantStored asserts a 200 with n emails and returns their ids.
func wantStored(t *testing.T, resp *testenv.Response, n int) []string {
	t.Helper()
	if resp.Status != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", resp.Status, resp.Body)
	}
	var out struct {
		Items []struct{ ID string }
	}
	json.Unmarshal(resp.Body, &out)
	if len(out.Items) != n {
		t.Fatalf("stored %d emails, want %d: %s", len(out.Items), n, resp.Body)
	}
	ids := make([]string, n)
	for i, it := range out.Items {
		ids[i] = it.ID
	}
	return ids
}

// wantRefused asserts status with a clear {error} message containing text.
// A 400 comes in the validation envelope, with the message its only form
// error.
func wantRefused(t *testing.T, resp *testenv.Response, status int, text string) {
	t.Helper()
	if resp.Status != status {
		t.Fatalf("status %d, want %d: %s", resp.Status, status, resp.Body)
	}
	var msg string
	switch e := resp.JSON(t)["error"].(type) {
	case string:
		msg = e
		if status == http.StatusBadRequest {
			t.Errorf("400 answers {\"error\": %q}, want the validation envelope", e)
		}
	case map[string]any:
		forms, _ := e["formErrors"].([]any)
		fields, _ := e["fieldErrors"].(map[string]any)
		if status != http.StatusBadRequest || len(forms) != 1 || fields == nil || len(fields) != 0 {
			t.Fatalf("%d answers %s, want one form error", status, resp.Body)
		}
		msg, _ = forms[0].(string)
	}
	if !strings.Contains(msg, text) {
		t.Errorf("error %q does not say %q", msg, text)
	}
}

func rawOf(t *testing.T, e *testenv.Env, key, id string) string {
	t.Helper()
	resp := e.Do(t, http.MethodGet, "/v1/emails/"+id+"/raw", key, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("raw %s: %d %s", id, resp.Status, resp.Body)
	}
	return string(resp.Body)
}

func metricValue(t *testing.T, e *testenv.Env, series string) string {
	t.Helper()
	resp := e.Do(t, http.MethodGet, "/metrics", "", nil)
	for _, line := range strings.Split(string(resp.Body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return "absent"
}

func TestMailgunWebhook(t *testing.T) {
	t.Parallel()
	forEachBackendWith(t, withInbound, func(t *testing.T, e *testenv.Env) {
		parsed := inboundtest.LoadForm(t, "mailgun-parsed.json")
		parsed.SignMailgun(mailgunKey, "token-parsed", time.Now())
		body, ct := parsed.Multipart(t)
		ids := wantStored(t, postProvider(t, e, "/v1/inbound/mailgun", acme, ct, body), 1)
		raw := rawOf(t, e, acme, ids[0])
		if !strings.Contains(raw, "Content-Disposition: inline; filename=logo.png") || !strings.Contains(raw, "Subject: Re: your ticket") {
			t.Errorf("composed raw:\n%s", raw)
		}
		got := e.Do(t, http.MethodGet, "/v1/emails/"+ids[0], acme, nil).JSON(t)["item"].(map[string]any)
		if got["sender"] != "bob@example.com" || got["recipient"] != "support@acme.test" || len(got["body"].(map[string]any)["attachments"].([]any)) != 2 {
			t.Errorf("stored email = %v", got)
		}

		// Mailgun's retry (a new multipart encoding of the same request)
		// stores nothing new and answers with the stored email.
		body, ct = parsed.Multipart(t)
		if again := wantStored(t, postProvider(t, e, "/v1/inbound/mailgun", acme, ct, body), 1); again[0] != ids[0] {
			t.Errorf("retry answered %v, want the stored %v", again, ids)
		}
		if v := metricValue(t, e, `mailsink_inbound_webhook_duplicates_total{provider="mailgun"}`); v != "1" {
			t.Errorf("duplicates metric = %s, want 1", v)
		}

		// The raw MIME at /mime is kept byte for byte.
		mime := inboundtest.LoadForm(t, "mailgun-mime.json")
		mime.SignMailgun(mailgunKey, "token-mime", time.Now())
		body, ct = mime.Multipart(t)
		ids = wantStored(t, postProvider(t, e, "/v1/inbound/mailgun/mime", acme, ct, body), 1)
		if raw := rawOf(t, e, acme, ids[0]); raw != mime.Fields["body-mime"] {
			t.Errorf("raw is not body-mime byte for byte:\n%q", raw)
		}

		// A replayed token with another message is refused.
		replay := inboundtest.LoadForm(t, "mailgun-mime.json")
		replay.SignMailgun(mailgunKey, "token-mime", time.Now())
		replay.Fields["body-mime"] = strings.Replace(replay.Fields["body-mime"], "Hello", "Pay me", 1)
		body, ct = replay.Multipart(t)
		wantRefused(t, postProvider(t, e, "/v1/inbound/mailgun/mime", acme, ct, body), http.StatusNotAcceptable, "token was already used")
		// ... also when it is addressed to another account.
		replay.Fields["recipient"] = "x@globex.test"
		body, ct = replay.Multipart(t)
		wantRefused(t, postProvider(t, e, "/v1/inbound/mailgun/mime", acme, ct, body), http.StatusNotAcceptable, "token was already used")

		sign := func(edit func(f *inboundtest.Form)) ([]byte, string) {
			f := inboundtest.LoadForm(t, "mailgun-mime.json")
			f.SignMailgun(mailgunKey, "token-"+testenv.RandomHex(4), time.Now())
			edit(f)
			return f.Multipart(t)
		}
		for _, tc := range []struct {
			name string
			edit func(f *inboundtest.Form)
			text string
		}{
			{"unsigned", func(f *inboundtest.Form) { delete(f.Fields, "signature") }, "not signed"},
			{"wrong signature", func(f *inboundtest.Form) { f.SignMailgun("other", f.Fields["token"], time.Now()) }, "does not match"},
			{"stale", func(f *inboundtest.Form) { f.SignMailgun(mailgunKey, "old", time.Now().Add(-13*time.Hour)) }, "outside"},
			{"no message", func(f *inboundtest.Form) {
				for _, k := range []string{"body-mime", "from", "subject"} {
					delete(f.Fields, k)
				}
			}, "neither body-mime"},
			{"bad recipient", func(f *inboundtest.Form) { f.Fields["recipient"] = "not-an-address" }, "not a valid address"},
		} {
			body, ct := sign(tc.edit)
			resp := postProvider(t, e, "/v1/inbound/mailgun/mime", acme, ct, body)
			if resp.Status != http.StatusNotAcceptable {
				t.Errorf("%s: status %d, want 406: %s", tc.name, resp.Status, resp.Body)
				continue
			}
			wantRefused(t, resp, http.StatusNotAcceptable, tc.text)
		}
		wantRefused(t, postProvider(t, e, "/v1/inbound/mailgun", acme, "multipart/form-data; boundary=x", []byte("--x\r\nbroken")), http.StatusNotAcceptable, "")
		wantRefused(t, postProvider(t, e, "/v1/inbound/mailgun", acme, "text/plain", []byte("hello")), http.StatusNotAcceptable, "not a form")
		body, ct = sign(func(*inboundtest.Form) {})
		wantRefused(t, postProvider(t, e, "/v1/inbound/mailgun", "", ct, body), http.StatusUnauthorized, "Basic")
		wantRefused(t, postProvider(t, e, "/v1/inbound/mailgun", "wrong", ct, body), http.StatusUnauthorized, "invalid API key")
		if v := metricValue(t, e, `mailsink_inbound_webhook_signature_failures_total{provider="mailgun"}`); v != "2" {
			t.Errorf("signature failures metric = %s, want 2", v)
		}
		if n := len(list(t, e, acme, "")); n != 2 {
			t.Errorf("acme has %d emails, want the 2 stored", n)
		}
		if n := len(list(t, e, globex, "")); n != 0 {
			t.Errorf("globex has %d emails, want 0", n)
		}
	})
}

// TestMailgunUnsignedAccount: an account without a signing key takes
// unsigned requests (the API key authenticates them).
func TestMailgunUnsignedAccount(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		f := inboundtest.LoadForm(t, "mailgun-mime.json")
		body, ct := f.Multipart(t)
		wantStored(t, postProvider(t, e, "/v1/inbound/mailgun/mime", acme, ct, body), 1)
	})
}

// TestProviderMultiAccountRetry: a delivery whose recipients belong to two
// accounts (by domain) stores one email in each, and its retry stores
// nothing new in either. The answer, to acme's key, shows acme's email
// only: nothing of globex's.
func TestProviderMultiAccountRetry(t *testing.T) {
	t.Parallel()
	forEachBackendWith(t, withInbound, func(t *testing.T, e *testenv.Env) {
		// Mailgun's recipient may list several addresses.
		f := inboundtest.LoadForm(t, "mailgun-mime.json")
		f.Fields["recipient"] = "support@acme.test, ops@globex.test"
		f.SignMailgun(mailgunKey, "token-multi", time.Now())
		for range 2 {
			body, ct := f.Multipart(t)
			resp := postProvider(t, e, "/v1/inbound/mailgun/mime", acme, ct, body)
			wantStored(t, resp, 1)
			if bytes.Contains(resp.Body, []byte("globex")) {
				t.Errorf("acme's answer shows globex's email: %s", resp.Body)
			}
		}
		a, g := list(t, e, acme, ""), list(t, e, globex, "")
		if len(a) != 1 || len(g) != 1 || g[0]["recipient"] != "ops@globex.test" {
			t.Errorf("acme %v, globex %v: want one email each", a, g)
		}
		if a[0]["recipient"] != "support@acme.test" {
			t.Errorf("acme's email: %v", a[0])
		}
	})
}

// TestProviderIdempotencyKeyIsTheCallers: a delivery that acme's key routes
// to globex (a recipient at globex's domain) keeps its Idempotency-Key in
// acme's name. It can neither see that globex used the key itself (a
// different request would be refused) nor make globex's own later request
// with the key fail; acme's retry is still recognised.
func TestProviderIdempotencyKeyIsTheCallers(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		create := func(key, rcpt, idem string) *testenv.Response {
			req, err := http.NewRequest(http.MethodPost, e.BaseURL+"/v1/emails",
				strings.NewReader(`{"recipient":"`+rcpt+`","sender":"s@example.com"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", idem)
			return e.Send(t, req)
		}
		deliver := func(idem string) *testenv.Response {
			f := &inboundtest.Form{Fields: map[string]string{
				"envelope": `{"to":["ops@globex.test"],"from":"a@example.com"}`,
				"email":    "From: a@example.com\r\nSubject: routed\r\n\r\nhi\r\n",
			}}
			body, ct := f.Multipart(t)
			return postProvider(t, e, "/v1/inbound/sendgrid", acme, ct, body, "Idempotency-Key", idem)
		}
		// Probe: globex used run-1; acme's delivery with it is stored.
		if resp := create(globex, "a@globex.test", "run-1"); resp.Status != http.StatusCreated {
			t.Fatalf("globex's create: %d %s", resp.Status, resp.Body)
		}
		wantStored(t, deliver("run-1"), 0)
		// Poison: acme delivers with run-2 first; globex's own run-2 is
		// its own, and acme's retry is recognised.
		wantStored(t, deliver("run-2"), 0)
		if resp := create(globex, "b@globex.test", "run-2"); resp.Status != http.StatusCreated {
			t.Errorf("globex's create after acme's delivery: %d %s, want 201", resp.Status, resp.Body)
		}
		wantStored(t, deliver("run-2"), 0)
		if n := len(list(t, e, globex, "recipient=ops@globex.test")); n != 2 {
			t.Errorf("globex has %d routed emails, want 2 (run-1 and run-2, the retry storing nothing)", n)
		}
	})
}

func TestSendGridWebhook(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		raw := inboundtest.LoadForm(t, "sendgrid-raw.json")
		body, ct := raw.Multipart(t)
		ids := wantStored(t, postProvider(t, e, "/v1/inbound/sendgrid", acme, ct, body), 1)
		if got := rawOf(t, e, acme, ids[0]); got != raw.Fields["email"] {
			t.Errorf("raw is not email byte for byte: %q", got)
		}
		parsed := inboundtest.LoadForm(t, "sendgrid-parsed.json")
		body, ct = parsed.Multipart(t)
		ids = wantStored(t, postProvider(t, e, "/v1/inbound/sendgrid", acme, ct, body), 1)
		got := e.Do(t, http.MethodGet, "/v1/emails/"+ids[0], acme, nil).JSON(t)["item"].(map[string]any)
		if got["sender"] != "alice@example.com" || got["recipient"] != "billing@acme.test" || got["subject"] != "Invoice 42" {
			t.Errorf("stored = %v", got)
		}
		// SendGrid has no delivery id: the same post twice is two emails,
		// unless the sender adds an Idempotency-Key.
		for range 2 {
			body, ct = parsed.Multipart(t)
			wantStored(t, postProvider(t, e, "/v1/inbound/sendgrid", acme, ct, body, "Idempotency-Key", "sg-1"), 1)
		}
		if n := len(list(t, e, acme, "")); n != 3 {
			t.Errorf("acme has %d emails, want 3", n)
		}
		wantRefused(t, postProvider(t, e, "/v1/inbound/sendgrid", acme, "application/x-www-form-urlencoded", []byte("a=b")), http.StatusBadRequest, "multipart/form-data")
		parsed.Fields["envelope"] = "{"
		body, ct = parsed.Multipart(t)
		wantRefused(t, postProvider(t, e, "/v1/inbound/sendgrid", acme, ct, body), http.StatusBadRequest, "envelope")
		empty := &inboundtest.Form{Fields: map[string]string{"to": "a@acme.test"}}
		body, ct = empty.Multipart(t)
		wantRefused(t, postProvider(t, e, "/v1/inbound/sendgrid", acme, ct, body), http.StatusBadRequest, "neither email")
	})
}

func TestPostmarkWebhook(t *testing.T) {
	t.Parallel()
	forEachBackendWith(t, func(c *config.Config) { c.MaxMessageBytes = 64 << 10 }, func(t *testing.T, e *testenv.Env) {
		parsed := inboundtest.Fixture(t, "postmark-parsed.json")
		ids := wantStored(t, postProvider(t, e, "/v1/inbound/postmark", acme, "application/json", parsed), 1)
		again := wantStored(t, postProvider(t, e, "/v1/inbound/postmark", acme, "application/json", parsed), 1)
		if again[0] != ids[0] {
			t.Errorf("retry answered %v, want %v", again, ids)
		}
		raw := inboundtest.Fixture(t, "postmark-raw.json")
		ids = wantStored(t, postProvider(t, e, "/v1/inbound/postmark", acme, "application/json", raw), 1)
		var pm struct{ RawEmail string }
		json.Unmarshal(raw, &pm)
		if got := rawOf(t, e, acme, ids[0]); got != pm.RawEmail {
			t.Errorf("raw not RawEmail byte for byte: %q", got)
		}
		if n := len(list(t, e, acme, "")); n != 2 {
			t.Errorf("acme has %d emails, want 2", n)
		}
		var obj map[string]any
		json.Unmarshal(parsed, &obj)
		obj["MessageID"] = "other"
		obj["Attachments"].([]any)[0].(map[string]any)["Content"] = "%%%"
		badB64, _ := json.Marshal(obj)
		wantRefused(t, postProvider(t, e, "/v1/inbound/postmark", acme, "application/json", badB64), http.StatusForbidden, "not base64")
		wantRefused(t, postProvider(t, e, "/v1/inbound/postmark", acme, "application/json", []byte("{")), http.StatusForbidden, "not Postmark")
		wantRefused(t, postProvider(t, e, "/v1/inbound/postmark", acme, "application/json", []byte(`{"MessageID":"x"}`)), http.StatusForbidden, "neither RawEmail")
		obj["Attachments"].([]any)[0].(map[string]any)["Content"] = strings.Repeat("QUFB", 30<<10)
		big, _ := json.Marshal(obj)
		wantRefused(t, postProvider(t, e, "/v1/inbound/postmark", acme, "application/json", big), http.StatusForbidden, "over the limit")
		huge := bytes.Repeat([]byte(" "), 2<<20)
		wantRefused(t, postProvider(t, e, "/v1/inbound/postmark", acme, "application/json", huge), http.StatusForbidden, "too large")
		if n := len(list(t, e, acme, "")); n != 2 {
			t.Errorf("acme has %d emails after refusals, want 2", n)
		}
	})
}

func TestSESWebhook(t *testing.T) {
	t.Parallel()
	sns, edit := withSNS(t)
	forEachBackendWith(t, edit, func(t *testing.T, e *testenv.Env) {
		post := func(body []byte, messageType string) *testenv.Response {
			return postProvider(t, e, "/v1/inbound/ses", acme, "text/plain; charset=UTF-8", body, "X-Amz-Sns-Message-Type", messageType)
		}
		token := testenv.RandomHex(8)
		resp := post(sns.Sign(t, inboundtest.Confirmation(snsTopic, token)), "SubscriptionConfirmation")
		if resp.Status != http.StatusOK || sns.ConfirmedToken(token) != 1 {
			t.Fatalf("confirmation: %d %s, confirmed %d times", resp.Status, resp.Body, sns.ConfirmedToken(token))
		}
		received := string(inboundtest.Fixture(t, "ses-received.json"))
		id := "msg-" + testenv.RandomHex(4)
		for _, version := range []string{"1", "2"} {
			m := inboundtest.Notification(snsTopic, id+version, received)
			m.SignatureVersion = version
			ids := wantStored(t, post(sns.Sign(t, m), "Notification"), 1)
			// SNS retries with the same MessageId.
			if again := wantStored(t, post(sns.Sign(t, m), "Notification"), 1); again[0] != ids[0] {
				t.Errorf("retry answered %v, want %v", again, ids)
			}
		}
		if n := len(list(t, e, acme, "")); n != 2 {
			t.Errorf("acme has %d emails, want 2", n)
		}
		signed := func(edit func(m *inboundtest.Message)) []byte {
			m := inboundtest.Notification(snsTopic, "id-"+testenv.RandomHex(4), received)
			edit(m)
			return sns.Sign(t, m)
		}
		wantRefused(t, post(signed(func(m *inboundtest.Message) { m.TopicArn = "arn:aws:sns:us-east-1:123456789012:other" }), "Notification"), http.StatusBadRequest, "snsTopicArns")
		wantRefused(t, post(signed(func(m *inboundtest.Message) { m.SigningCertURL = "https://example.com/cert.pem" }), "Notification"), http.StatusBadRequest, "SigningCertURL")
		wantRefused(t, post(bytes.Replace(signed(func(*inboundtest.Message) {}), []byte("93%"), []byte("94%"), 1), "Notification"), http.StatusBadRequest, "does not verify")
		wantRefused(t, post(signed(func(m *inboundtest.Message) { m.Message = string(inboundtest.Fixture(t, "ses-s3-action.json")) }), "Notification"), http.StatusBadRequest, "use the SNS action")
		wantRefused(t, post([]byte("{"), "Notification"), http.StatusBadRequest, "not an SNS message")
		wantRefused(t, post(signed(func(*inboundtest.Message) {}), "SubscriptionConfirmation"), http.StatusBadRequest, "does not match")
		if n := len(list(t, e, acme, "")); n != 2 {
			t.Errorf("acme has %d emails after refusals, want 2", n)
		}
	})
}

// TestSESCertificateFile: with MAILSINK_SNS_SIGNING_CERT_FILE set, that
// certificate verifies messages and nothing is fetched.
func TestSESCertificateFile(t *testing.T) {
	t.Parallel()
	sns := inboundtest.NewSNS(t)
	path := filepath.Join(t.TempDir(), "sns.pem")
	os.WriteFile(path, sns.CertPEM, 0o600)
	loaded, err := config.Load(func(name string) string {
		if name == "MAILSINK_SNS_SIGNING_CERT_FILE" {
			return path
		}
		return ""
	}, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(c *config.Config) {
		withInbound(c)
		c.SNSSigningCert = loaded.SNSSigningCert
	}
	forEachBackendWith(t, edit, func(t *testing.T, e *testenv.Env) {
		m := inboundtest.Notification(snsTopic, "file-"+testenv.RandomHex(4), string(inboundtest.Fixture(t, "ses-received.json")))
		m.SigningCertURL = "https://sns.eu-west-1.amazonaws.com/unreachable.pem"
		wantStored(t, postProvider(t, e, "/v1/inbound/ses", acme, "text/plain", sns.Sign(t, m)), 1)
	})
}

// TestProviderStoreOutage: with the store down, every provider is answered
// 503, which makes it retry.
func TestProviderStoreOutage(t *testing.T) {
	t.Parallel()
	sns, edit := withSNS(t)
	e := testenv.Start(t, testenv.DownRedis(t), func(c *config.Config) {
		edit(c)
		c.Store.Timeout = 2 * time.Second
	})
	mg := inboundtest.LoadForm(t, "mailgun-mime.json")
	mg.SignMailgun(mailgunKey, "token-down", time.Now())
	mgBody, mgType := mg.Multipart(t)
	sg := inboundtest.LoadForm(t, "sendgrid-raw.json")
	sgBody, sgType := sg.Multipart(t)
	for _, tc := range []struct {
		path, contentType string
		body              []byte
	}{
		{"/v1/inbound/mailgun/mime", mgType, mgBody},
		{"/v1/inbound/sendgrid", sgType, sgBody},
		{"/v1/inbound/postmark", "application/json", inboundtest.Fixture(t, "postmark-raw.json")},
		{"/v1/inbound/ses", "text/plain", sns.Sign(t, inboundtest.Notification(snsTopic, "down", string(inboundtest.Fixture(t, "ses-received.json"))))},
	} {
		resp := postProvider(t, e, tc.path, acme, tc.contentType, tc.body)
		if resp.Status != http.StatusServiceUnavailable {
			t.Errorf("%s: status %d, want 503: %s", tc.path, resp.Status, resp.Body)
		}
	}
}

// providerChecks returns the configuration TestOpenAPIDescribesTheAnswers
// needs for the provider routes, and the requests that check every answer
// they document.
func providerChecks(t *testing.T) (func(*config.Config), func(*testing.T, *testenv.Env, *openAPI)) {
	sns, edit := withSNS(t)
	return edit, func(t *testing.T, e *testenv.Env, o *openAPI) {
		mg := inboundtest.LoadForm(t, "mailgun-mime.json")
		mg.SignMailgun(mailgunKey, "openapi-"+testenv.RandomHex(4), time.Now())
		body, ct := mg.Multipart(t)
		for _, path := range []string{"/v1/inbound/mailgun", "/v1/inbound/mailgun/mime"} {
			o.check(t, "POST", path, postProvider(t, e, path, acme, ct, body))
			o.check(t, "POST", path, postProvider(t, e, path, acme, "text/plain", body))
			o.check(t, "POST", path, postProvider(t, e, path, "", ct, body))
		}
		sg := inboundtest.LoadForm(t, "sendgrid-raw.json")
		body, ct = sg.Multipart(t)
		o.check(t, "POST", "/v1/inbound/sendgrid", postProvider(t, e, "/v1/inbound/sendgrid", acme, ct, body))
		o.check(t, "POST", "/v1/inbound/sendgrid", postProvider(t, e, "/v1/inbound/sendgrid", acme, "text/plain", body))
		o.check(t, "POST", "/v1/inbound/sendgrid", postProvider(t, e, "/v1/inbound/sendgrid", "", ct, body))
		pm := inboundtest.Fixture(t, "postmark-parsed.json")
		o.check(t, "POST", "/v1/inbound/postmark", postProvider(t, e, "/v1/inbound/postmark", acme, "application/json", pm))
		o.check(t, "POST", "/v1/inbound/postmark", postProvider(t, e, "/v1/inbound/postmark", acme, "application/json", []byte("[")))
		o.check(t, "POST", "/v1/inbound/postmark", postProvider(t, e, "/v1/inbound/postmark", "", "application/json", pm))
		note := inboundtest.Notification(snsTopic, "openapi-"+testenv.RandomHex(4), string(inboundtest.Fixture(t, "ses-received.json")))
		o.check(t, "POST", "/v1/inbound/ses", postProvider(t, e, "/v1/inbound/ses", acme, "text/plain", sns.Sign(t, note)))
		o.check(t, "POST", "/v1/inbound/ses", postProvider(t, e, "/v1/inbound/ses", acme, "text/plain", sns.Sign(t, inboundtest.Confirmation(snsTopic, testenv.RandomHex(8)))))
		o.check(t, "POST", "/v1/inbound/ses", postProvider(t, e, "/v1/inbound/ses", acme, "text/plain", []byte("{")))
		o.check(t, "POST", "/v1/inbound/ses", postProvider(t, e, "/v1/inbound/ses", "", "text/plain", []byte("{")))
	}
}

// TestSendGridSignedAccount: with a verification key, an unsigned or
// wrongly signed Inbound Parse request is refused with 400.
func TestSendGridSignedAccount(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	forEachBackendWith(t, func(c *config.Config) { c.Accounts[0].Inbound.SendGridKey = &key.PublicKey }, func(t *testing.T, e *testenv.Env) {
		body, ct := inboundtest.LoadForm(t, "sendgrid-raw.json").Multipart(t)
		sig := inboundtest.SignSendGrid(t, key, body)
		wantStored(t, postProvider(t, e, "/v1/inbound/sendgrid", acme, ct, body,
			inbound.SendGridSignatureHeader, sig.Signature, inbound.SendGridTimestampHeader, sig.Timestamp), 1)
		wantRefused(t, postProvider(t, e, "/v1/inbound/sendgrid", acme, ct, body), http.StatusBadRequest, "not signed")
		wantRefused(t, postProvider(t, e, "/v1/inbound/sendgrid", acme, ct, body,
			inbound.SendGridSignatureHeader, sig.Signature, inbound.SendGridTimestampHeader, sig.Timestamp+"0"), http.StatusBadRequest, "does not verify")
		if v := metricValue(t, e, `mailsink_inbound_webhook_signature_failures_total{provider="sendgrid"}`); v != "2" {
			t.Errorf("signature failures = %s, want 2", v)
		}
		// globex sets no key: its requests need no signature. The
		// recipient is at acme's domain, so the email is acme's, and
		// globex's answer does not show it.
		wantStored(t, postProvider(t, e, "/v1/inbound/sendgrid", globex, ct, body), 0)
		if n := len(list(t, e, acme, "")); n != 2 {
			t.Errorf("acme has %d emails, want 2", n)
		}
	})
}

// TestSendGridSignedReplay: with a verification key, the same signed
// request again is a recognised retry (200, the stored email, nothing new
// stored) and one dated outside the 5-minute window is refused with 400,
// which SendGrid does not retry. Nothing is stored twice.
func TestSendGridSignedReplay(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	forEachBackendWith(t, func(c *config.Config) { c.Accounts[0].Inbound.SendGridKey = &key.PublicKey }, func(t *testing.T, e *testenv.Env) {
		body, ct := inboundtest.LoadForm(t, "sendgrid-raw.json").Multipart(t)
		post := func(sig inbound.SendGridSignature) *testenv.Response {
			return postProvider(t, e, "/v1/inbound/sendgrid", acme, ct, body,
				inbound.SendGridSignatureHeader, sig.Signature, inbound.SendGridTimestampHeader, sig.Timestamp)
		}
		sig := inboundtest.SignSendGrid(t, key, body)
		ids := wantStored(t, post(sig), 1)
		for i := range 2 {
			if again := wantStored(t, post(sig), 1); again[0] != ids[0] {
				t.Errorf("replay %d answered %v, want the stored %v", i+1, again, ids)
			}
		}
		if v := metricValue(t, e, `mailsink_inbound_webhook_duplicates_total{provider="sendgrid"}`); v != "2" {
			t.Errorf("duplicates metric = %s, want 2", v)
		}
		for _, tc := range []struct{ name, ts string }{
			{"dated 1970", "0"},
			{"six minutes old", strconv.FormatInt(time.Now().Add(-6*time.Minute).Unix(), 10)},
			{"six minutes ahead", strconv.FormatInt(time.Now().Add(6*time.Minute).Unix(), 10)},
		} {
			resp := post(inboundtest.SignSendGridAt(t, key, body, tc.ts))
			if resp.Status != http.StatusBadRequest {
				t.Errorf("%s: status %d, want 400: %s", tc.name, resp.Status, resp.Body)
				continue
			}
			wantRefused(t, resp, http.StatusBadRequest, "outside the 5m0s accepted around now")
		}
		// The same body signed anew, a second earlier, is another delivery.
		first, _ := strconv.ParseInt(sig.Timestamp, 10, 64)
		wantStored(t, post(inboundtest.SignSendGridAt(t, key, body, strconv.FormatInt(first-1, 10))), 1)
		if n := len(list(t, e, acme, "")); n != 2 {
			t.Errorf("acme has %d emails, want 2 (one request, and the same body signed anew)", n)
		}
	})
}

// TestSendGridReplayAcrossReplicas: two replicas on one Redis recognise a
// signed SendGrid request each other stored.
func TestSendGridReplayAcrossReplicas(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	shared := testenv.SharedRedis(t)
	withKey := func(c *config.Config) { c.Accounts[0].Inbound.SendGridKey = &key.PublicKey }
	a, b := testenv.Start(t, shared, withKey), testenv.Start(t, shared, withKey)
	body, ct := inboundtest.LoadForm(t, "sendgrid-raw.json").Multipart(t)
	sig := inboundtest.SignSendGrid(t, key, body)
	header := []string{inbound.SendGridSignatureHeader, sig.Signature, inbound.SendGridTimestampHeader, sig.Timestamp}
	ids := wantStored(t, postProvider(t, a, "/v1/inbound/sendgrid", acme, ct, body, header...), 1)
	if again := wantStored(t, postProvider(t, b, "/v1/inbound/sendgrid", acme, ct, body, header...), 1); again[0] != ids[0] {
		t.Errorf("replica B answered %v, want A's %v", again, ids)
	}
	if n := len(list(t, b, acme, "")); n != 1 {
		t.Errorf("acme has %d emails, want 1", n)
	}
}

// TestInboundBasicAuth: every /v1/inbound route takes the key as a Basic
// auth password; the other routes do not.
func TestInboundBasicAuth(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		raw := []byte("From: a@example.com\r\nTo: b@acme.test\r\nSubject: basic\r\n\r\nx\r\n")
		if resp := postProvider(t, e, "/v1/inbound", acme, "message/rfc822", raw); resp.Status != http.StatusCreated {
			t.Errorf("raw inbound with Basic auth: %d %s", resp.Status, resp.Body)
		}
		resp := postProvider(t, e, "/v1/inbound", "", "message/rfc822", raw)
		wantError(t, resp, http.StatusUnauthorized)
		if got := resp.Header.Values("WWW-Authenticate"); len(got) != 2 || !strings.HasPrefix(got[1], "Basic") {
			t.Errorf("WWW-Authenticate = %q, want Bearer and Basic challenges", got)
		}
		req, _ := http.NewRequest(http.MethodGet, e.BaseURL+"/v1/emails", nil)
		req.SetBasicAuth("any", acme)
		wantError(t, e.Send(t, req), http.StatusUnauthorized)
	})
}

// A body too large for the webhook is refused with the provider's no-retry
// status; SendGrid's and SES's 400 comes in the validation envelope.
func TestProviderBodyTooLarge(t *testing.T) {
	t.Parallel()
	forEachBackendWith(t, func(c *config.Config) { c.MaxMessageBytes = 64 << 10 }, func(t *testing.T, e *testenv.Env) {
		huge := bytes.Repeat([]byte("a"), 2<<20)
		wantRefused(t, postProvider(t, e, "/v1/inbound/sendgrid", acme, "multipart/form-data; boundary=x", huge), http.StatusBadRequest, "too large")
		wantRefused(t, postProvider(t, e, "/v1/inbound/ses", acme, "text/plain", huge), http.StatusBadRequest, "too large")
		wantRefused(t, postProvider(t, e, "/v1/inbound/mailgun", acme, "multipart/form-data; boundary=x", huge), http.StatusNotAcceptable, "too large")
	})
}

// TestProviderWrongContentType: Postmark posts application/json and SNS
// text/plain; a body of another declared type is refused for good and
// stores nothing (docs/providers.md, "wrong Content-Type"), though the
// JSON in it would parse.
func TestProviderWrongContentType(t *testing.T) {
	t.Parallel()
	sns, edit := withSNS(t)
	forEachBackendWith(t, edit, func(t *testing.T, e *testenv.Env) {
		pm := inboundtest.Fixture(t, "postmark-parsed.json")
		for _, ct := range []string{"text/plain", "multipart/form-data; boundary=x", "application/json; charset"} {
			wantRefused(t, postProvider(t, e, "/v1/inbound/postmark", acme, ct, pm), http.StatusForbidden, "Content-Type")
		}
		note := sns.Sign(t, inboundtest.Notification(snsTopic, "ct-"+testenv.RandomHex(4), string(inboundtest.Fixture(t, "ses-received.json"))))
		for _, ct := range []string{"application/x-www-form-urlencoded", "image/png"} {
			wantRefused(t, postProvider(t, e, "/v1/inbound/ses", acme, ct, note), http.StatusBadRequest, "Content-Type")
		}
		if n := len(list(t, e, acme, "")); n != 0 {
			t.Errorf("acme has %d emails after refusals, want 0", n)
		}
		wantStored(t, postProvider(t, e, "/v1/inbound/postmark", acme, "application/json; charset=utf-8", pm), 1)
		wantStored(t, postProvider(t, e, "/v1/inbound/ses", acme, "text/plain; charset=UTF-8", note), 1)
	})
}
