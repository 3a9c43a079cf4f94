package httpapi_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/smtp"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/clientaddr"
	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/internal/testenv/dnstest"
	"github.com/mailsink/mailsink/internal/testenv/spamdtest"
)

// One spamd for the package's tests: it takes seconds to start.
var spamd spamdtest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	spamd.Stop()
	os.Exit(code)
}

// checkOf fetches a check of an email and returns its status and body.
func checkOf(t *testing.T, e *testenv.Env, key, id, check string) (*testenv.Response, map[string]any) {
	t.Helper()
	resp := e.Do(t, http.MethodGet, "/v1/emails/"+id+"/checks/"+check, key, nil)
	if resp.Status != http.StatusOK {
		return resp, nil
	}
	return resp, resp.JSON(t)
}

func mustCheck(t *testing.T, e *testenv.Env, key, id, check string) map[string]any {
	t.Helper()
	resp, body := checkOf(t, e, key, id, check)
	if resp.Status != http.StatusOK {
		t.Fatalf("checks/%s: status %d: %s", check, resp.Status, resp.Body)
	}
	return body
}

// signedDomain is a domain with a DKIM key, an SPF policy and a DMARC
// record in the test's DNS server.
type signedDomain struct {
	name string
	key  ed25519.PrivateKey
}

func publish(t *testing.T, dns *dnstest.Server, name, spfAllowed string) *signedDomain {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dns.TXT("mail._domainkey."+name, "v=DKIM1; k=ed25519; p="+base64.StdEncoding.EncodeToString(pub))
	dns.TXT(name, "v=spf1 ip4:"+spfAllowed+" -all")
	dns.TXT("_dmarc."+name, "v=DMARC1; p=reject")
	return &signedDomain{name, priv}
}

func (d *signedDomain) sign(t *testing.T, msg string) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := dkim.Sign(&out, strings.NewReader(msg), &dkim.SignOptions{Domain: d.name, Selector: "mail", Signer: d.key}); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// sendVia delivers msg over SMTP, through a PROXY protocol header that
// presents client as the sender's address, and returns the id of the
// email stored for rcpt.
func sendVia(t *testing.T, e *testenv.Env, key, client, from, rcpt string, msg []byte) string {
	t.Helper()
	c, err := net.Dial("tcp", e.SMTP)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "PROXY TCP4 %s 127.0.0.1 40000 25\r\n", client)
	sc, err := smtp.NewClient(c, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if err := sc.Hello("client.example"); err != nil {
		t.Fatal(err)
	}
	if err := sc.Mail(from); err != nil {
		t.Fatal(err)
	}
	if err := sc.Rcpt(rcpt); err != nil {
		t.Fatal(err)
	}
	w, err := sc.Data()
	if err != nil {
		t.Fatal(err)
	}
	w.Write(msg)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	sc.Quit()
	items := list(t, e, key, "recipient="+url.QueryEscape(rcpt))
	if len(items) != 1 {
		t.Fatalf("%d emails for %s, want 1", len(items), rcpt)
	}
	return items[0]["id"].(string)
}

// inboundRaw stores a raw message over HTTP for rcpt and returns its id.
func inboundRaw(t *testing.T, e *testenv.Env, key, rcpt string, raw []byte) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.BaseURL+"/v1/inbound", bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Envelope-To", rcpt)
	resp := e.Send(t, req)
	if resp.Status != http.StatusCreated {
		t.Fatalf("inbound: %d %s", resp.Status, resp.Body)
	}
	return resp.JSON(t)["items"].([]any)[0].(map[string]any)["id"].(string)
}

func features(warnings []any) []string {
	var out []string
	for _, w := range warnings {
		out = append(out, w.(map[string]any)["feature"].(string))
	}
	return out
}

const newsletter = `<!DOCTYPE html><html><head><style>.row{display:flex}</style></head><body>
<div class="row"><video src="https://cdn.example/v.mp4"></video><p>Spring sale</p></div></body></html>`

// Each check answers on known messages, on every store: the HTML of a
// newsletter with flex and video, links that answer 200 and 404 and one
// the SSRF guard refuses, the GTUBE scored as spam by a real spamd, and a
// message signed with a key in the test DNS passing DKIM, SPF and DMARC
// while the same message altered, or sent from an address SPF does not
// allow, fails. Results are kept until refresh, and go with the email.
func TestChecks(t *testing.T) {
	t.Parallel()
	daemon := spamd.Get(t)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ok" && r.URL.Path != "/logo.png" {
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(site.Close)
	trusted, err := clientaddr.Parse("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			dns := dnstest.Start(t)
			e := testenv.Start(t, b, func(c *config.Config) {
				c.Checks.SpamdAddr = daemon.Addr()
				c.Checks.DNSResolver = dns.Addr()
				c.TrustedProxies = trusted
				c.Accounts[0].Webhooks.AllowPrivateTargets = true // acme
			})
			t.Run("html", func(t *testing.T) { t.Parallel(); testHTMLCheck(t, e) })
			t.Run("links", func(t *testing.T) { t.Parallel(); testLinkCheck(t, e, site.URL) })
			t.Run("spam", func(t *testing.T) { t.Parallel(); testSpamCheck(t, e) })
			t.Run("auth", func(t *testing.T) { t.Parallel(); testAuthCheck(t, e, dns) })
		})
	}
}

func testHTMLCheck(t *testing.T, e *testenv.Env) {
	id := create(t, e, acme, map[string]any{"recipient": "html@acme.test", "sender": "news@shop.example",
		"subject": "Spring", "html": newsletter})["id"].(string)
	first := mustCheck(t, e, acme, id, "html")
	got := features(first["warnings"].([]any))
	for _, want := range []string{"css-display-flex", "html-video"} {
		if !slices.Contains(got, want) {
			t.Errorf("warnings %v lack %s", got, want)
		}
	}
	if total := first["total"].(map[string]any); total["unsupported"].(float64) <= 0 || total["supported"].(float64) >= 100 {
		t.Errorf("total = %v", total)
	}
	again := mustCheck(t, e, acme, id, "html")
	if again["checkedAt"] != first["checkedAt"] {
		t.Errorf("a second read ran the check again: checkedAt %v, then %v", first["checkedAt"], again["checkedAt"])
	}
	testenv.WaitFor(t, 5*time.Second, "a later checkedAt after refresh", func() bool {
		fresh := e.Do(t, http.MethodGet, "/v1/emails/"+id+"/checks/html?refresh=1", acme, nil)
		return fresh.Status == http.StatusOK && fresh.JSON(t)["checkedAt"] != first["checkedAt"]
	})

	if resp, _ := checkOf(t, e, globex, id, "html"); resp.Status != http.StatusNotFound {
		t.Errorf("another account's email: %d, want 404", resp.Status)
	}
	if resp, _ := checkOf(t, e, acme, "not-a-uuid", "html"); resp.Status != http.StatusBadRequest {
		t.Errorf("a bad id: %d, want 400", resp.Status)
	}
	if resp, _ := checkOf(t, e, acme, id, "virus"); resp.Status != http.StatusNotFound {
		t.Errorf("an unknown check: %d, want 404", resp.Status)
	}
	if resp := e.Do(t, http.MethodGet, "/v1/emails/"+id+"/checks/html?refresh=maybe", acme, nil); resp.Status != http.StatusBadRequest {
		t.Errorf("refresh=maybe: %d, want 400", resp.Status)
	}
	if resp := e.Do(t, http.MethodGet, "/v1/emails/"+id+"/checks/html", "", nil); resp.Status != http.StatusUnauthorized {
		t.Errorf("no key: %d, want 401", resp.Status)
	}
	if resp := e.Do(t, http.MethodDelete, "/v1/emails/"+id, acme, nil); resp.Status != http.StatusNoContent {
		t.Fatalf("delete: %d", resp.Status)
	}
	if resp, _ := checkOf(t, e, acme, id, "html"); resp.Status != http.StatusNotFound {
		t.Errorf("the check of a deleted email: %d, want 404", resp.Status)
	}
}

func testLinkCheck(t *testing.T, e *testenv.Env, site string) {
	html := `<p><a href="` + site + `/ok">shop</a> <a href="` + site + `/gone">old offer</a> <a href="mailto:x@shop.example">mail</a>` +
		`<img src="` + site + `/logo.png"></p>`
	for _, tc := range []struct {
		key, rcpt string
		private   bool
	}{{acme, "links@acme.test", true}, {globex, "links@globex.test", false}} {
		id := create(t, e, tc.key, map[string]any{"recipient": tc.rcpt, "sender": "news@shop.example", "html": html})["id"].(string)
		items := mustCheck(t, e, tc.key, id, "links")["items"].([]any)
		got := map[string]any{}
		for _, it := range items {
			m := it.(map[string]any)
			got[strings.TrimPrefix(m["url"].(string), site)] = m
		}
		if len(items) != 3 {
			t.Errorf("%s: %d items, want 3 (mailto: is not fetched): %v", tc.rcpt, len(items), items)
		}
		for path, want := range map[string]float64{"/ok": 200, "/gone": 404, "/logo.png": 200} {
			m, ok := got[path].(map[string]any)
			if !ok {
				t.Errorf("%s: no item for %s", tc.rcpt, path)
				continue
			}
			if tc.private && (m["status"] != want || m["error"] != nil) {
				t.Errorf("%s: %s answered %v (error %v), want %v", tc.rcpt, path, m["status"], m["error"], want)
			}
			if !tc.private && (m["status"] != nil || m["error"] == nil || !strings.Contains(m["error"].(string), "refused")) {
				t.Errorf("%s: %s answered %v (error %v), want refused by the SSRF guard", tc.rcpt, path, m["status"], m["error"])
			}
		}
	}
}

func testSpamCheck(t *testing.T, e *testenv.Env) {
	id := inboundRaw(t, e, acme, "spam@acme.test", spamdtest.Message("Win", "Click now.\r\n"+spamdtest.GTUBE))
	body := mustCheck(t, e, acme, id, "spam")
	if body["isSpam"] != true || body["score"].(float64) < 1000 || body["threshold"].(float64) != 5 {
		t.Errorf("GTUBE: %v", body)
	}
	var names []string
	for _, r := range body["rules"].([]any) {
		m := r.(map[string]any)
		names = append(names, m["name"].(string))
		if m["name"] == "GTUBE" && (m["score"].(float64) != 1000 || m["description"] == "") {
			t.Errorf("GTUBE rule: %v", m)
		}
	}
	if !slices.Contains(names, "GTUBE") {
		t.Errorf("rules %v lack GTUBE", names)
	}
}

func testAuthCheck(t *testing.T, e *testenv.Env, dns *dnstest.Server) {
	d := publish(t, dns, "signed.test", "198.51.100.7")
	msg := "From: Shop <orders@signed.test>\r\nTo: auth@acme.test\r\nSubject: Your order\r\nDate: Mon, 02 Mar 2026 10:00:00 +0000\r\n\r\nThanks!\r\n"
	signed := d.sign(t, msg)

	id := sendVia(t, e, acme, "198.51.100.7", "bounce@signed.test", "auth-pass@acme.test", signed)
	body := mustCheck(t, e, acme, id, "auth")
	sig := body["dkim"].([]any)[0].(map[string]any)
	spf, dmarc := body["spf"].(map[string]any), body["dmarc"].(map[string]any)
	if sig["domain"] != "signed.test" || sig["selector"] != "mail" || sig["result"] != "pass" {
		t.Errorf("signed: dkim %v", sig)
	}
	if spf["result"] != "pass" || spf["domain"] != "signed.test" || spf["clientIp"] != "198.51.100.7" {
		t.Errorf("from an address SPF allows: spf %v", spf)
	}
	if dmarc["result"] != "pass" || dmarc["policy"] != "reject" {
		t.Errorf("signed: dmarc %v", dmarc)
	}

	id = sendVia(t, e, acme, "203.0.113.9", "bounce@signed.test", "auth-spf-fail@acme.test", signed)
	body = mustCheck(t, e, acme, id, "auth")
	if spf := body["spf"].(map[string]any); spf["result"] != "fail" || spf["clientIp"] != "203.0.113.9" {
		t.Errorf("from an address SPF does not allow: spf %v", spf)
	}
	if dmarc := body["dmarc"].(map[string]any); dmarc["result"] != "pass" {
		t.Errorf("signed, SPF failing: dmarc %v, want pass by DKIM", dmarc)
	}

	altered := bytes.Replace(signed, []byte("Thanks!"), []byte("Thanks, pay here!"), 1)
	id = inboundRaw(t, e, acme, "auth-altered@acme.test", altered)
	body = mustCheck(t, e, acme, id, "auth")
	sig = body["dkim"].([]any)[0].(map[string]any)
	if sig["result"] != "fail" {
		t.Errorf("altered: dkim %v", sig)
	}
	if spf := body["spf"].(map[string]any); spf["result"] != "none" {
		t.Errorf("over HTTP: spf %v, want none", spf)
	}
	if dmarc := body["dmarc"].(map[string]any); dmarc["result"] != "fail" {
		t.Errorf("altered: dmarc %v", dmarc)
	}
}

// Without spamd the spam check says it is not configured (409); with a
// spamd that does not answer, that the upstream failed (502).
func TestSpamCheckNotConfiguredOrDown(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	l.Close()
	embedded := testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}
	for _, tc := range []struct {
		addr   string
		status int
		says   string
	}{{"", http.StatusConflict, "MAILSINK_SPAMD_ADDR"}, {down, http.StatusBadGateway, "spamd"}} {
		e := testenv.Start(t, embedded, func(c *config.Config) { c.Checks.SpamdAddr = tc.addr })
		id := create(t, e, acme, map[string]any{"recipient": "x@acme.test", "sender": "y@shop.example", "text": "hi"})["id"].(string)
		resp, _ := checkOf(t, e, acme, id, "spam")
		if resp.Status != tc.status || !strings.Contains(resp.JSON(t)["error"].(string), tc.says) {
			t.Errorf("spamd %q: %d %s, want %d saying %s", tc.addr, resp.Status, resp.Body, tc.status, tc.says)
		}
	}
}

// checksForOpenAPI points the checks of the OpenAPI test's mailsink at a
// DNS server of the test's own and at a spamd that is not there.
func checksForOpenAPI(t *testing.T) func(*config.Config) {
	dns := dnstest.Start(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	l.Close()
	return func(c *config.Config) {
		c.Checks.DNSResolver = dns.Addr()
		c.Checks.SpamdAddr = down
	}
}

// exerciseChecks checks the answers of the checks' endpoints against the
// OpenAPI document: id came over HTTP, smtpID over SMTP.
func exerciseChecks(t *testing.T, e *testenv.Env, o *openAPI, id, smtpID, missing string) {
	t.Helper()
	for _, name := range []string{"html", "links", "spam", "auth"} {
		path := "/v1/emails/{emailId}/checks/" + name
		for _, email := range []string{id, smtpID} {
			o.check(t, "GET", path, get(t, e, "/v1/emails/"+email+"/checks/"+name, acme))
		}
		o.check(t, "GET", path, get(t, e, "/v1/emails/"+id+"/checks/"+name+"?refresh=1", acme))
		o.check(t, "GET", path, get(t, e, "/v1/emails/x/checks/"+name, acme))
		o.check(t, "GET", path, get(t, e, missing+"/checks/"+name, acme))
		o.check(t, "GET", path, get(t, e, "/v1/emails/"+id+"/checks/"+name, ""))
	}
}
