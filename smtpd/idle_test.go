package smtpd_test

import (
	"crypto/tls"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
)

// idleReadTimeout is the read timeout of the tests below; the data timeout
// stays at its default of 5 minutes.
const idleReadTimeout = 400 * time.Millisecond

// openSession connects to addr (over STARTTLS when tc is not nil), says
// EHLO, and starts a transaction to rcpt.
func openSession(t *testing.T, addr string, tc *tls.Config, rcpt string) *textproto.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(time.Minute))
	tp := textproto.NewConn(nc)
	t.Cleanup(func() { tp.Close() })
	if _, _, err := tp.ReadResponse(220); err != nil {
		t.Fatalf("greeting: %v", err)
	}
	cmd(t, tp, "EHLO idle.example", 250)
	if tc != nil {
		cmd(t, tp, "STARTTLS", 220)
		tlsConn := tls.Client(nc, tc)
		if err := tlsConn.Handshake(); err != nil {
			t.Fatal(err)
		}
		tp = textproto.NewConn(tlsConn)
		cmd(t, tp, "EHLO idle.example", 250)
	}
	cmd(t, tp, "MAIL FROM:<a@example.com>", 250)
	cmd(t, tp, "RCPT TO:<"+rcpt+">", 250)
	return tp
}

// wantTimedOut reads the next reply and fails unless it is 421 4.4.2 and
// came within a few read timeouts of since (far from the data timeout), and
// the connection then ends.
func wantTimedOut(t *testing.T, tp *textproto.Conn, since time.Time) {
	t.Helper()
	code, msg, err := tp.ReadResponse(0)
	waited := time.Since(since)
	if err != nil || code != 421 || !strings.HasPrefix(msg, "4.4.2 ") {
		t.Fatalf("an idle client got %d %q (%v) after %v, want 421 4.4.2", code, msg, err, waited)
	}
	if waited < idleReadTimeout || waited > 10*idleReadTimeout {
		t.Errorf("cut off after %v, want about the read timeout (%v)", waited, idleReadTimeout)
	}
	if line, err := tp.ReadLine(); err == nil {
		t.Errorf("the connection is still open after the timeout: read %q", line)
	}
}

// A client that stops in the middle of a message is cut off once it has
// been idle for the read timeout, not held for the whole data timeout
// (issue 29: an idle DATA kept its connection and its buffer for 300 s),
// with DATA and with BDAT, in plaintext and over TLS; nothing is stored.
func TestIdleTransferEndsAtTheReadTimeout(t *testing.T) {
	t.Parallel()
	e, tc := startTLS(t, func(c *config.Config) { c.SMTP.ReadTimeout = idleReadTimeout })
	for _, overTLS := range []bool{false, true} {
		var conf *tls.Config
		name := "plaintext"
		if overTLS {
			conf, name = tc, "tls"
		}
		t.Run(name+"/DATA", func(t *testing.T) {
			tp := openSession(t, e.SMTP, conf, "idle-data@acme.test")
			cmd(t, tp, "DATA", 354)
			tp.W.WriteString("Subject: idle\r\n\r\nthe first li")
			tp.W.Flush()
			wantTimedOut(t, tp, time.Now())
		})
		t.Run(name+"/BDAT in a chunk", func(t *testing.T) {
			tp := openSession(t, e.SMTP, conf, "idle-bdat@acme.test")
			tp.W.WriteString("BDAT 100 LAST\r\nSubject: idle\r\n")
			tp.W.Flush()
			wantTimedOut(t, tp, time.Now())
		})
		t.Run(name+"/BDAT between chunks", func(t *testing.T) {
			tp := openSession(t, e.SMTP, conf, "idle-bdat@acme.test")
			part := "Subject: idle\r\n\r\n"
			tp.W.WriteString("BDAT " + strconv.Itoa(len(part)) + "\r\n" + part)
			tp.W.Flush()
			if code, msg, err := tp.ReadResponse(250); err != nil {
				t.Fatalf("BDAT: %d %q %v", code, msg, err)
			}
			wantTimedOut(t, tp, time.Now())
		})
	}
	for _, rcpt := range []string{"idle-data@acme.test", "idle-bdat@acme.test"} {
		if n := len(items(t, e, testenv.AcmeKey, "recipient="+rcpt)); n != 0 {
			t.Errorf("%d emails stored for %s from idle clients", n, rcpt)
		}
	}
}

// A client that keeps sending, each part well within the read timeout,
// may take longer than the read timeout for its whole message: the read
// timeout bounds the pauses, the data timeout the whole.
func TestSteadySenderOutlastsTheReadTimeout(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, func(c *config.Config) { c.SMTP.ReadTimeout = idleReadTimeout })
	tp := openSession(t, e.SMTP, nil, "steady@acme.test")
	cmd(t, tp, "DATA", 354)
	tp.W.WriteString("Subject: steady\r\n\r\n")
	tp.W.Flush()
	start := time.Now()
	pause := time.NewTicker(idleReadTimeout / 4)
	defer pause.Stop()
	for time.Since(start) < 3*idleReadTimeout {
		<-pause.C
		tp.W.WriteString("one more line, sent well within the read timeout\r\n")
		tp.W.Flush()
	}
	cmd(t, tp, ".", 250)
	if n := len(items(t, e, testenv.AcmeKey, "recipient=steady@acme.test")); n != 1 {
		t.Errorf("%d emails stored from the steady sender, want 1", n)
	}
}
