package auth

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/mailsink/mailsink/internal/checks/resolve"
	"github.com/mailsink/mailsink/internal/testenv/dnstest"
	"github.com/mailsink/mailsink/store"
)

// signer is a DKIM key published in the test DNS server.
type signer struct {
	domain, selector string
	key              ed25519.PrivateKey
}

func newSigner(t testing.TB, dns *dnstest.Server, domain, selector string) *signer {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dns.TXT(selector+"._domainkey."+domain, "v=DKIM1; k=ed25519; p="+base64.StdEncoding.EncodeToString(pub))
	return &signer{domain, selector, priv}
}

func (s *signer) sign(t testing.TB, msg string) []byte {
	t.Helper()
	var out bytes.Buffer
	err := dkim.Sign(&out, strings.NewReader(msg), &dkim.SignOptions{Domain: s.domain, Selector: s.selector, Signer: s.key,
		HeaderKeys: []string{"From", "To", "Subject", "Date"}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func message(from, subject, body string) string {
	return "From: " + from + "\r\nTo: rcpt@example.com\r\nSubject: " + subject +
		"\r\nDate: Mon, 02 Mar 2026 10:00:00 +0000\r\n\r\n" + body + "\r\n"
}

func transcript(client, mailFrom string) *store.Transcript {
	return &store.Transcript{ClientAddress: client, Helo: "client.example", Mail: store.TranscriptCommand{Address: mailFrom}}
}

func check(t *testing.T, c *Checker, raw []byte, tr *store.Transcript) *Report {
	t.Helper()
	r, err := c.Check(context.Background(), raw, tr)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A message signed with a key the DNS publishes passes DKIM and DMARC;
// the same message altered fails both.
func TestSignedAndAltered(t *testing.T) {
	t.Parallel()
	dns := dnstest.Start(t)
	c := &Checker{Resolver: resolve.New(dns.Addr(), 2*time.Second)}
	s := newSigner(t, dns, "signed.test", "sel1")
	dns.TXT("_dmarc.signed.test", "v=DMARC1; p=reject")
	raw := s.sign(t, message("Shop <news@signed.test>", "Your order", "Thanks for your order."))

	r := check(t, c, raw, nil)
	if len(r.DKIM) != 1 || r.DKIM[0] != (DKIM{Domain: "signed.test", Selector: "sel1", Result: Pass, Reason: r.DKIM[0].Reason}) {
		t.Fatalf("dkim = %+v", r.DKIM)
	}
	if r.SPF.Result != None || !strings.Contains(r.SPF.Reason, "SMTP") {
		t.Errorf("spf of mail that came over HTTP = %+v, want none", r.SPF)
	}
	if d := r.DMARC; d.Result != Pass || d.Domain != "signed.test" || d.Policy != "reject" || !d.DKIMAligned || d.SPFAligned {
		t.Errorf("dmarc = %+v, want a pass by DKIM under p=reject", d)
	}

	for name, altered := range map[string][]byte{
		"body":    bytes.Replace(raw, []byte("Thanks for"), []byte("Thanks 4"), 1),
		"subject": bytes.Replace(raw, []byte("Subject: Your order"), []byte("Subject: Your refund"), 1),
	} {
		r := check(t, c, altered, nil)
		if len(r.DKIM) != 1 || r.DKIM[0].Result != Fail || !strings.Contains(r.DKIM[0].Reason, "did not verify") {
			t.Errorf("%s altered: dkim = %+v, want fail", name, r.DKIM)
		}
		if r.DMARC.Result != Fail || r.DMARC.DKIMAligned {
			t.Errorf("%s altered: dmarc = %+v, want fail", name, r.DMARC)
		}
	}
}

// SPF passes for the address the domain names and fails for another; with
// SPF aligned, DMARC passes an unsigned message.
func TestSPFByClientAddress(t *testing.T) {
	t.Parallel()
	dns := dnstest.Start(t)
	c := &Checker{Resolver: resolve.New(dns.Addr(), 2*time.Second)}
	dns.TXT("spf.test", "v=spf1 ip4:127.0.0.1 ip6:2001:db8::1 -all")
	dns.TXT("soft.test", "v=spf1 ip4:127.0.0.1 ~all")
	dns.TXT("_dmarc.spf.test", "v=DMARC1; p=quarantine; aspf=s")
	raw := []byte(message("billing@spf.test", "Invoice", "Attached."))
	tests := []struct {
		client, mailFrom string
		spf, dmarc       string
	}{
		{"127.0.0.1:40000", "bounce@spf.test", Pass, Pass},
		{"[2001:db8::1]:40000", "bounce@spf.test", Pass, Pass},
		{"192.0.2.7:40000", "bounce@spf.test", Fail, Fail},
		{"192.0.2.7:40000", "bounce@soft.test", "softfail", Fail},
		{"127.0.0.1:40000", "bounce@nospf.test", None, Fail},
	}
	for _, tt := range tests {
		r := check(t, c, raw, transcript(tt.client, tt.mailFrom))
		if r.SPF.Result != tt.spf || r.SPF.Domain != strings.Split(tt.mailFrom, "@")[1] || r.SPF.Reason == "" {
			t.Errorf("%s from %s: spf = %+v, want %s", tt.mailFrom, tt.client, r.SPF, tt.spf)
		}
		if r.DMARC.Result != tt.dmarc {
			t.Errorf("%s from %s: dmarc = %+v, want %s", tt.mailFrom, tt.client, r.DMARC, tt.dmarc)
		}
	}
}

// A subdomain's mail is judged by its organisational domain's record, in
// relaxed alignment by default, with sp= as the policy.
func TestOrganisationalDomain(t *testing.T) {
	t.Parallel()
	dns := dnstest.Start(t)
	c := &Checker{Resolver: resolve.New(dns.Addr(), 2*time.Second)}
	s := newSigner(t, dns, "org.test", "k")
	dns.TXT("_dmarc.org.test", "v=DMARC1; p=reject; sp=quarantine")
	r := check(t, c, s.sign(t, message("news@mail.org.test", "Hi", "Hello")), nil)
	if d := r.DMARC; d.Result != Pass || d.Domain != "mail.org.test" || d.PolicyDomain != "org.test" || d.Policy != "quarantine" {
		t.Errorf("dmarc = %+v", d)
	}
	dns.TXT("_dmarc.strict.test", "v=DMARC1; p=reject; adkim=s")
	s2 := newSigner(t, dns, "strict.test", "k")
	r = check(t, c, s2.sign(t, message("news@mail.strict.test", "Hi", "Hello")), nil)
	if r.DKIM[0].Result != Pass || r.DMARC.Result != Fail {
		t.Errorf("strict alignment, signed by the parent: dkim %+v, dmarc %+v", r.DKIM, r.DMARC)
	}
}

// Unusable signatures and DNS failures are permerror and temperror with
// their reasons; past MaxSignatures signatures are counted, not verified;
// a From field DMARC cannot use is a permerror.
func TestErrors(t *testing.T) {
	t.Parallel()
	dns := dnstest.Start(t)
	c := &Checker{Resolver: resolve.New(dns.Addr(), 2*time.Second)}
	s := newSigner(t, dns, "keys.test", "good")
	unpublished := &signer{"keys.test", "gone", s.key}
	failing := &signer{"flaky.test", "k", s.key}
	dns.ServFail("k._domainkey.flaky.test")
	dns.ServFail("_dmarc.flaky.test")

	r := check(t, c, unpublished.sign(t, message("a@keys.test", "x", "y")), nil)
	if r.DKIM[0].Result != PermError || !strings.Contains(r.DKIM[0].Reason, "no key") {
		t.Errorf("a key not published: %+v", r.DKIM)
	}
	if r.DMARC.Result != None {
		t.Errorf("no DMARC record: %+v", r.DMARC)
	}
	r = check(t, c, failing.sign(t, message("a@flaky.test", "x", "y")), nil)
	if r.DKIM[0].Result != TempError || r.DMARC.Result != TempError {
		t.Errorf("SERVFAIL: dkim %+v, dmarc %+v", r.DKIM, r.DMARC)
	}

	raw := []byte(message("a@keys.test", "x", "y"))
	for range MaxSignatures + 2 {
		raw = s.sign(t, string(raw))
	}
	r = check(t, c, raw, nil)
	if len(r.DKIM) != MaxSignatures || r.DKIMIgnored != 2 {
		t.Errorf("%d signatures: verified %d, ignored %d", MaxSignatures+2, len(r.DKIM), r.DKIMIgnored)
	}
	for _, d := range r.DKIM {
		if d.Result != Pass {
			t.Errorf("one of several good signatures: %+v", d)
		}
	}

	two := []byte("From: a@keys.test\r\nFrom: b@keys.test\r\nSubject: x\r\n\r\ny\r\n")
	if r := check(t, c, two, nil); r.DMARC.Result != PermError || len(r.DKIM) != 0 {
		t.Errorf("two From fields: %+v", r)
	}
	if r := check(t, c, []byte("Subject: x\r\n\r\ny\r\n"), transcript("not an address", "a@keys.test")); r.SPF.Result != None {
		t.Errorf("a transcript without a client address: %+v", r.SPF)
	}
}

// A check stops when its context ends.
func TestCancelled(t *testing.T) {
	t.Parallel()
	dns := dnstest.Start(t)
	c := &Checker{Resolver: resolve.New(dns.Addr(), 2*time.Second)}
	s := newSigner(t, dns, "keys.test", "good")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Check(ctx, s.sign(t, message("a@keys.test", "x", strings.Repeat("y", 1<<20))), nil); err == nil {
		t.Error("a cancelled check answered")
	}
}

// Header fields are unfolded and found by name however the header is
// written, and reading stops at the body.
func TestHeader(t *testing.T) {
	t.Parallel()
	raw := []byte("Received: x\r\nfrom: A\r\n <a@b.test>\nDKIM-Signature: v=1;\r\n\td=x.test; s=s1\r\n\r\nFrom: body@c.test\r\n")
	got := header(raw, "From", "DKIM-Signature")
	if len(got) != 2 || got[0].value != "A <a@b.test>" || tagList(got[1].value)["d"] != "x.test" || tagList(got[1].value)["s"] != "s1" {
		t.Errorf("header = %+v", got)
	}
}
