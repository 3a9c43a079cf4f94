package smtpd_test

import (
	"encoding/base64"
	"net"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/clientaddr"
	"github.com/mailsink/mailsink/internal/testenv"
)

// greetVia connects from local, sends header first (a PROXY protocol
// header, or nothing), and reads the greeting.
func greetVia(t *testing.T, addr, local string, header []byte) (*textproto.Conn, int, string) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if len(header) > 0 {
		c.Write(header)
	}
	tp := textproto.NewConn(c)
	t.Cleanup(func() { tp.Close() })
	code, msg, _ := tp.ReadResponse(0)
	return tp, code, msg
}

func proxyV1(client string) []byte {
	return []byte("PROXY TCP4 " + client + " 127.0.0.1 40000 25\r\n")
}

func proxyV2(t *testing.T, client string) []byte {
	t.Helper()
	h := proxyproto.HeaderProxyFromAddrs(2, &net.TCPAddr{IP: net.ParseIP(client), Port: 40000}, &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 25})
	b, err := h.Format()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Behind a trusted proxy (a load balancer that speaks the PROXY protocol),
// each client the proxy names has its own share of the connections (issue:
// every client had the proxy's address, so one client's connections locked
// out the whole fleet).
func TestProxyProtocolNamesTheClient(t *testing.T) {
	t.Parallel()
	trusted, err := clientaddr.Parse("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, func(c *config.Config) {
		c.SMTP.MaxConnectionsPerAddress = 2
		c.TrustedProxies = trusted
	})
	for i := range 2 {
		if _, code, msg := greetVia(t, e.SMTP, "127.0.0.1", proxyV1("10.0.0.1")); code != 220 {
			t.Fatalf("connection %d for 10.0.0.1: %d %q", i+1, code, msg)
		}
	}
	if _, code, msg := greetVia(t, e.SMTP, "127.0.0.1", proxyV2(t, "10.0.0.1")); code != 421 || !strings.Contains(msg, "your address") {
		t.Fatalf("third connection for 10.0.0.1: %d %q, want 421 for the address", code, msg)
	}
	// Another client behind the same proxy (v2 header this time).
	tp, code, msg := greetVia(t, e.SMTP, "127.0.0.1", proxyV2(t, "10.0.0.2"))
	if code != 220 {
		t.Fatalf("a connection for 10.0.0.2: %d %q", code, msg)
	}
	// The session speaks SMTP as usual after the header.
	tp.PrintfLine("EHLO client.test")
	if code, msg, _ := tp.ReadResponse(250); code != 250 {
		t.Fatalf("EHLO after a PROXY header: %d %q", code, msg)
	}
}

func TestProxyProtocolOnlyFromTrustedPeers(t *testing.T) {
	t.Parallel()
	trusted, _ := clientaddr.Parse("127.0.0.1")
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, func(c *config.Config) {
		c.SMTP.MaxConnectionsPerAddress = 2
		c.SMTP.LimitLoopback = true
		c.TrustedProxies = trusted
	})
	// An untrusted peer's header is a bad command, and its connections
	// count as its own address's.
	for i := range 2 {
		tp, code, msg := greetVia(t, e.SMTP, "127.0.0.7", proxyV1("10.0.0.9"))
		if code != 220 {
			t.Fatalf("untrusted connection %d: %d %q", i+1, code, msg)
		}
		if code, msg, _ := tp.ReadResponse(0); code/100 != 5 {
			t.Errorf("an untrusted peer's PROXY line: %d %q, want a 5xx", code, msg)
		}
	}
	if _, code, _ := greetVia(t, e.SMTP, "127.0.0.7", proxyV1("10.0.0.10")); code != 421 {
		t.Errorf("a third connection from the untrusted peer naming another client: %d, want 421", code)
	}
	// A trusted peer without a header is its own client; one with a
	// malformed header is dropped.
	start := time.Now()
	if _, code, msg := greetVia(t, e.SMTP, "127.0.0.1", nil); code != 220 {
		t.Errorf("trusted peer without a header: %d %q", code, msg)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Errorf("the greeting took %v", waited)
	}
	if _, code, msg := greetVia(t, e.SMTP, "127.0.0.1", []byte("PROXY TCP4 nonsense\r\n")); code == 220 {
		t.Errorf("a malformed PROXY header was greeted: %d %q", code, msg)
	}
}

// The wrong-key limit counts the client a trusted proxy names, not the
// proxy: one client's guesses do not lock out the others behind it.
func TestProxyProtocolClientsHaveTheirOwnAuthLimit(t *testing.T) {
	t.Parallel()
	trusted, _ := clientaddr.Parse("127.0.0.1")
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, func(c *config.Config) {
		c.HTTP.AuthFailuresPerMinute = 1
		c.TrustedProxies = trusted
	})
	auth := "AUTH PLAIN " + base64.StdEncoding.EncodeToString([]byte("\x00user\x00guess"))
	try := func(client string) int {
		tp, code, msg := greetVia(t, e.SMTP, "127.0.0.1", proxyV1(client))
		if code != 220 {
			t.Fatalf("greeting: %d %q", code, msg)
		}
		defer tp.Close()
		tp.PrintfLine("EHLO client.test")
		tp.ReadResponse(250)
		tp.PrintfLine("%s", auth)
		code, _, _ = tp.ReadResponse(0)
		return code
	}
	for _, want := range []int{535, 454} {
		if got := try("10.0.0.1"); got != want {
			t.Errorf("wrong key from 10.0.0.1: %d, want %d", got, want)
		}
	}
	if got := try("10.0.0.2"); got != 535 {
		t.Errorf("wrong key from 10.0.0.2 behind the same proxy: %d, want 535 (its own limit)", got)
	}
}
