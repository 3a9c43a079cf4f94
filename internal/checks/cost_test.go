package checks

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/mailsink/mailsink/internal/testenv/dnstest"
	"github.com/mailsink/mailsink/internal/testenv/spamdtest"
	"github.com/mailsink/mailsink/store"
)

// TestCostOfLargeMessage measures each check on a 25 MB message: an HTML
// newsletter of that size (styles, links and images in every block),
// signed five times with DKIM. It runs only with MAILSINK_CHECKS_COST=1
// (docs/benchmarks.md gives the command and the figures): the process's
// CPU time and the wall time of each first run, store write included.
func TestCostOfLargeMessage(t *testing.T) {
	if os.Getenv("MAILSINK_CHECKS_COST") == "" {
		t.Skip("set MAILSINK_CHECKS_COST=1 to measure the checks on a 25 MB message")
	}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(site.Close)
	dns := dnstest.Start(t)
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	dns.TXT("k._domainkey.shop.example", "v=DKIM1; k=ed25519; p="+base64.StdEncoding.EncodeToString(pub))
	dns.TXT("_dmarc.shop.example", "v=DMARC1; p=reject")

	var d spamdtest.Shared
	defer d.Stop()
	spamdAddr := ""
	if spamdtest.Path() != "" {
		spamdAddr = d.Get(t).Addr()
	}
	f := newFixture(t, Config{SpamdAddr: spamdAddr, DNSResolver: dns.Addr(), AllowPrivate: func(string) bool { return true }})

	var body strings.Builder
	for i := 0; body.Len() < 25<<20-4096; i++ {
		fmt.Fprintf(&body, `<table role="presentation" width="100%%" style="border-collapse:collapse;margin:0 auto"><tr>`+
			`<td style="padding:8px 12px;font-family:Arial,sans-serif;font-size:14px;color:#333;background-color:rgba(0,0,0,.03)">`+
			`<a href="%s/p/%d" style="color:#0066cc;text-decoration:none">Product %d</a>`+
			`<img src="%s/i/%d.png" width="100" height="100" alt="" style="display:block;border:0"></td></tr></table>`+"\r\n",
			site.URL, i, i, site.URL, i)
	}
	raw := []byte("From: Shop <news@shop.example>\r\nTo: big@acme.test\r\nSubject: Catalogue\r\n" +
		"Date: Mon, 02 Mar 2026 10:00:00 +0000\r\nMIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" +
		"<!DOCTYPE html><html><head><style>.row{display:flex} a:hover{color:red}</style></head><body>" + body.String() + "</body></html>\r\n")
	for range 5 {
		var out bytes.Buffer
		if err := dkim.Sign(&out, bytes.NewReader(raw), &dkim.SignOptions{Domain: "shop.example", Selector: "k", Signer: key}); err != nil {
			t.Fatal(err)
		}
		raw = out.Bytes()
	}
	id := store.NewID()
	now := time.Now().UTC().Truncate(time.Millisecond)
	e := &store.Email{ID: id, AccountID: "acct", Sender: "news@shop.example", Recipient: "big@acme.test",
		Status: store.StatusReceived, Labels: []string{}, RawSize: int64(len(raw)), ReceivedAt: now, CreatedAt: now, UpdatedAt: now}
	if err := f.st.CreateEmails(context.Background(), &store.Body{Raw: raw}, []*store.Email{e}); err != nil {
		t.Fatal(err)
	}
	// The first read parses the message (within html's figure); the
	// parse is cached for the checks after it, as for a message someone
	// opened first, and html runs again on the cached parse.
	names := []string{HTML, HTML, Links, Auth}
	if spamdAddr != "" {
		names = append(names, Spam)
	}
	t.Logf("message: %d bytes, HTML part with %d blocks, 5 DKIM signatures", len(raw), strings.Count(body.String(), "<table"))
	for _, name := range names {
		cpu0, start := cpuTime(), time.Now()
		out, err := f.checks.Result(context.Background(), "acct", id, name, true)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cpu, wall := cpuTime()-cpu0, time.Since(start)
		t.Logf("%-5s CPU %6.2f s  wall %6.2f s  result %d bytes", name, cpu.Seconds(), wall.Seconds(), len(out))
		if cpu > 2*time.Second {
			t.Errorf("%s took %s of CPU on a 25 MB message, over 2 s", name, cpu)
		}
	}
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
