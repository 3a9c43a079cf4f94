package smtpd_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	netsmtp "net/smtp"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
)

// startTLS runs mailsink with a self-signed certificate for mailsink.test
// (MAILSINK_SMTP_TLS_AUTO), AUTH refused outside TLS, an implicit-TLS
// listener, and edit's changes; it returns the environment and a client
// configuration that trusts the certificate as served by
// GET /tls/certificate.pem.
func startTLS(t *testing.T, edit func(*config.Config)) (*testenv.Env, *tls.Config) {
	t.Helper()
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, func(c *config.Config) {
		c.Store.DataDir = t.TempDir()
		c.TLS.AutoHosts = []string{"mailsink.test"}
		c.SMTP.TLSAddr = "127.0.0.1:0"
		c.SMTP.AllowInsecureAuth = false
		if edit != nil {
			edit(c)
		}
	})
	resp := e.Do(t, http.MethodGet, "/tls/certificate.pem", "", nil)
	if resp.Status != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-pem-file" {
		t.Fatalf("GET /tls/certificate.pem: %d %s", resp.Status, resp.Body)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(resp.Body) {
		t.Fatalf("certificate.pem holds no certificate: %s", resp.Body)
	}
	return e, &tls.Config{ServerName: "mailsink.test", RootCAs: pool}
}

// Go's net/smtp sends a PLAIN password only over TLS (or to localhost): with
// STARTTLS it delivers to a host name of the certificate.
func TestNetSMTPPlainAuthOverSTARTTLS(t *testing.T) {
	t.Parallel()
	e, tc := startTLS(t, nil)
	dial := func() *netsmtp.Client {
		conn, err := net.Dial("tcp", e.SMTP)
		if err != nil {
			t.Fatal(err)
		}
		c, err := netsmtp.NewClient(conn, "mailsink.test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	auth := netsmtp.PlainAuth("", "ci", testenv.GlobexKey, "mailsink.test")
	// Without TLS, net/smtp keeps the key to itself (and ends the session).
	if err := dial().Auth(auth); err == nil || !strings.Contains(err.Error(), "unencrypted") {
		t.Fatalf("AUTH without TLS: %v, want net/smtp's refusal", err)
	}
	c := dial()
	if ok, _ := c.Extension("STARTTLS"); !ok {
		t.Fatal("EHLO does not offer STARTTLS")
	}
	if err := c.StartTLS(tc); err != nil {
		t.Fatal(err)
	}
	if err := c.Auth(auth); err != nil {
		t.Fatal(err)
	}
	if err := c.Mail("app@example.com"); err != nil {
		t.Fatal(err)
	}
	// AUTH routes to globex, whatever the domain.
	if err := c.Rcpt("qa@acme.test"); err != nil {
		t.Fatal(err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, message)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Quit(); err != nil {
		t.Fatalf("QUIT over TLS: %v", err)
	}
	if got := items(t, e, testenv.GlobexKey, ""); len(got) != 1 {
		t.Fatalf("globex has %d emails, want 1", len(got))
	}
}

func TestImplicitTLS(t *testing.T) {
	t.Parallel()
	e, tc := startTLS(t, func(c *config.Config) { c.SMTP.RequireTLS = true })
	conn, err := tls.Dial("tcp", e.App.SMTPSAddr().String(), tc)
	if err != nil {
		t.Fatal(err)
	}
	c := smtp.NewClient(conn)
	defer c.Close()
	if err := c.Hello("client.test"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.Extension("STARTTLS"); ok {
		t.Error("STARTTLS offered on a TLS connection")
	}
	if err := c.Auth(sasl.NewPlainClient("", "ci", testenv.AcmeKey)); err != nil {
		t.Fatalf("AUTH over implicit TLS with insecure AUTH off and TLS required: %v", err)
	}
	if err := c.SendMail("app@example.com", []string{"qa@acme.test"}, strings.NewReader(message)); err != nil {
		t.Fatal(err)
	}
	c.Quit()
	if got := items(t, e, testenv.AcmeKey, ""); len(got) != 1 {
		t.Fatalf("acme has %d emails, want 1", len(got))
	}
	state := conn.ConnectionState()
	if state.Version < tls.VersionTLS12 {
		t.Errorf("TLS version %x", state.Version)
	}
}

// Only TLS 1.2 and later are spoken.
func TestOldTLSVersionsAreRefused(t *testing.T) {
	t.Parallel()
	e, tc := startTLS(t, nil)
	tc.MaxVersion = tls.VersionTLS11
	if conn, err := tls.Dial("tcp", e.App.SMTPSAddr().String(), tc); err == nil {
		conn.Close()
		t.Fatal("a TLS 1.1 handshake succeeded")
	}
}

func TestRequireTLS(t *testing.T) {
	t.Parallel()
	e, tc := startTLS(t, func(c *config.Config) { c.SMTP.RequireTLS = true })
	r := dialRaw(t, e.SMTP)
	r.cmd("EHLO client.test", 250)
	plain := "AUTH PLAIN " + base64.StdEncoding.EncodeToString([]byte("\x00ci\x00"+testenv.AcmeKey))
	for _, line := range []string{"MAIL FROM:<app@example.com>", plain} {
		if msg := r.cmd(line, 530); !strings.HasPrefix(msg, "5.7.0 ") {
			t.Errorf("%s before STARTTLS: 530 %q, want 5.7.0", line, msg)
		}
	}
	r.startTLS(tc)
	r.cmd("EHLO client.test", 250)
	r.cmd(plain, 235)
	r.cmd("MAIL FROM:<app@example.com>", 250)
	r.cmd("RCPT TO:<qa@acme.test>", 250)
	r.cmd("DATA", 354)
	r.cmd(strings.ReplaceAll(message, "\r\n.", "\r\n..")+".", 250)
	if got := items(t, e, testenv.AcmeKey, ""); len(got) != 1 {
		t.Fatalf("acme has %d emails, want 1", len(got))
	}
}

// rawConn is a raw SMTP connection for protocol cases.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	tp   *textproto.Conn
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	t.Cleanup(func() { conn.Close() })
	r := &rawConn{t: t, conn: conn, tp: textproto.NewConn(conn)}
	r.expect(220)
	return r
}

// cmd sends line and expects a reply with code want; it returns the reply.
func (r *rawConn) cmd(line string, want int) string {
	r.t.Helper()
	if err := r.tp.PrintfLine("%s", line); err != nil {
		r.t.Fatal(err)
	}
	return r.expect(want)
}

func (r *rawConn) expect(want int) string {
	r.t.Helper()
	code, msg, err := r.tp.ReadResponse(0)
	if code != want {
		r.t.Fatalf("got %d %q (%v), want %d", code, msg, err, want)
	}
	return msg
}

// startTLS upgrades the connection.
func (r *rawConn) startTLS(tc *tls.Config) {
	r.t.Helper()
	r.cmd("STARTTLS", 220)
	tconn := tls.Client(r.conn, tc)
	if err := tconn.Handshake(); err != nil {
		r.t.Fatal(err)
	}
	r.conn, r.tp = tconn, textproto.NewConn(tconn)
}

// closed reports whether the server ends the connection (after what it
// still had to say, which is returned).
func (r *rawConn) readToEnd() (string, bool) {
	r.t.Helper()
	r.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(r.tp.R)
	var ne net.Error
	timedOut := err != nil && (errorAs(err, &ne) && ne.Timeout())
	return string(b), !timedOut
}

func errorAs(err error, target *net.Error) bool {
	ne, ok := err.(net.Error)
	if ok {
		*target = ne
	}
	return ok
}

func TestSTARTTLSBadInput(t *testing.T) {
	t.Parallel()
	e, tc := startTLS(t, nil)

	t.Run("twice", func(t *testing.T) {
		r := dialRaw(t, e.SMTP)
		r.cmd("EHLO client.test", 250)
		r.startTLS(tc)
		r.cmd("EHLO client.test", 250)
		if msg := r.cmd("STARTTLS", 502); !strings.Contains(msg, "Already running in TLS") {
			t.Errorf("second STARTTLS: %q", msg)
		}
		r.cmd("MAIL FROM:<app@example.com>", 250) // the session goes on
	})

	t.Run("after MAIL", func(t *testing.T) {
		r := dialRaw(t, e.SMTP)
		r.cmd("EHLO client.test", 250)
		r.cmd("MAIL FROM:<app@example.com>", 250)
		r.startTLS(tc)
		// STARTTLS forgets everything said before it (RFC 3207 4.2):
		// the client must say EHLO again, and the MAIL is gone.
		r.cmd("EHLO client.test", 250)
		r.cmd("RCPT TO:<qa@acme.test>", 502)
		r.cmd("MAIL FROM:<app@example.com>", 250)
		r.cmd("RCPT TO:<qa@acme.test>", 250)
	})

	t.Run("garbage handshake", func(t *testing.T) {
		r := dialRaw(t, e.SMTP)
		r.cmd("EHLO client.test", 250)
		r.cmd("STARTTLS", 220)
		r.conn.Write([]byte("this is not a TLS client hello\r\nMAIL FROM:<a@b.test>\r\n"))
		rest, closed := r.readToEnd()
		if !strings.Contains(rest, "550 5.0.0 Handshake error") || !closed {
			t.Errorf("after a garbage handshake: %q, closed %v; want 550 and the end", rest, closed)
		}
		if strings.Contains(rest, "250") {
			t.Errorf("the garbage after the handshake was read as commands: %q", rest)
		}
	})

	t.Run("plaintext on the TLS port", func(t *testing.T) {
		conn, err := net.Dial("tcp", e.App.SMTPSAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(conn, "EHLO client.test\r\n")
		b, err := io.ReadAll(bufio.NewReader(conn))
		if !strings.HasPrefix(string(b), "554 5.7.0 This port expects TLS") {
			t.Errorf("plaintext EHLO on the TLS port: %q (%v)", b, err)
		}
	})

	t.Run("garbage on the TLS port", func(t *testing.T) {
		conn, err := net.Dial("tcp", e.App.SMTPSAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		conn.Write([]byte{0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5})
		if _, err := io.ReadAll(conn); err != nil {
			t.Errorf("a broken handshake on the TLS port: %v, want the connection closed", err)
		}
	})

	// Nothing above hurt the server.
	r := dialRaw(t, e.SMTP)
	r.cmd("EHLO client.test", 250)
	r.startTLS(tc)
	r.cmd("EHLO client.test", 250)
	r.cmd("QUIT", 221)
}

// Without a certificate, EHLO offers no STARTTLS and the certificate is 404.
func TestNoTLSByDefault(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)
	r := dialRaw(t, e.SMTP)
	if msg := r.cmd("EHLO client.test", 250); strings.Contains(msg, "STARTTLS") {
		t.Errorf("EHLO without a certificate: %q", msg)
	}
	r.cmd("STARTTLS", 502)
	if resp := e.Do(t, http.MethodGet, "/tls/certificate.pem", "", nil); resp.Status != http.StatusNotFound {
		t.Errorf("GET /tls/certificate.pem without a certificate: %d", resp.Status)
	}
	if e.App.SMTPSAddr() != nil || e.App.HTTPSAddr() != nil {
		t.Error("TLS listeners without a certificate")
	}
}

// TestFaultAtDataOverTLS checks the data fault under STARTTLS, where the 354
// is encrypted before the session sees the rule and cannot be taken back: the
// rule's reply follows the message, which is dropped, and the connection goes
// on.
func TestFaultAtDataOverTLS(t *testing.T) {
	t.Parallel()
	e, tc := startTLS(t, nil)
	if resp := e.Do(t, http.MethodPost, "/v1/faults", testenv.AcmeKey, map[string]any{"stage": "data", "count": 1,
		"reply": map[string]any{"code": 451, "text": "4.3.0 Try again later"}}); resp.Status != http.StatusCreated {
		t.Fatalf("POST /v1/faults: %d %s", resp.Status, resp.Body)
	}
	r := dialRaw(t, e.SMTP)
	r.cmd("EHLO client.test", 250)
	r.startTLS(tc)
	r.cmd("EHLO client.test", 250)
	r.cmd("MAIL FROM:<app@example.com>", 250)
	r.cmd("RCPT TO:<tls@acme.test>", 250)
	r.cmd("DATA", 354)
	if msg := r.cmd("Subject: tls\r\n\r\nhi\r\n.", 451); msg != "4.3.0 Try again later" {
		t.Errorf("end of the message: %q, want the rule's text", msg)
	}
	r.cmd("NOOP", 250)
	if got := items(t, e, testenv.AcmeKey, "recipient=tls@acme.test"); len(got) != 0 {
		t.Errorf("stored %v, want nothing for a faulted transaction", got)
	}
}
