package smtpd_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
)

// wireSession is a raw SMTP client: what it writes goes on the wire as it
// is, dot-stuffed or not, and it reads replies one at a time.
type wireSession struct {
	t    *testing.T
	conn net.Conn
	tp   *textproto.Reader
}

func dialWire(t *testing.T, addr string) *wireSession {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	w := &wireSession{t: t, conn: c, tp: textproto.NewReader(bufio.NewReader(c))}
	w.reply()
	return w
}

// startTLS upgrades the session with STARTTLS and greets again.
func (w *wireSession) startTLS(tc *tls.Config) {
	w.t.Helper()
	w.send("STARTTLS\r\n")
	if code := w.reply(); code != "220" {
		w.t.Fatalf("STARTTLS: %s", code)
	}
	tlsConn := tls.Client(w.conn, tc)
	if err := tlsConn.Handshake(); err != nil {
		w.t.Fatal(err)
	}
	w.conn, w.tp = tlsConn, textproto.NewReader(bufio.NewReader(tlsConn))
	w.send("EHLO wire.example\r\n")
	w.reply()
}

func (w *wireSession) send(s string) {
	w.t.Helper()
	if _, err := io.WriteString(w.conn, s); err != nil {
		w.t.Fatal(err)
	}
}

// reply reads one reply, multi-line or not, and returns its code.
func (w *wireSession) reply() string {
	w.t.Helper()
	for {
		line, err := w.tp.ReadLine()
		if err != nil {
			w.t.Fatalf("reading a reply: %v", err)
		}
		if len(line) < 4 || line[3] != '-' {
			return line[:min(3, len(line))]
		}
	}
}

// sameRepliesPlainAndTLS runs send on a plaintext session and on a STARTTLS
// one, each greeted with EHLO, and fails unless both got the same replies.
func sameRepliesPlainAndTLS(t *testing.T, addr string, tc *tls.Config, send func(w *wireSession, rcpt string) []string) {
	t.Helper()
	plain := dialWire(t, addr)
	plain.send("EHLO wire.example\r\n")
	plain.reply()
	plainCodes := send(plain, "plain")
	secure := dialWire(t, addr)
	secure.send("EHLO wire.example\r\n")
	secure.reply()
	secure.startTLS(tc)
	tlsCodes := send(secure, "tls")
	if strings.Join(plainCodes, " ") != strings.Join(tlsCodes, " ") {
		t.Fatalf("replies in plaintext %v, over TLS %v", plainCodes, tlsCodes)
	}
}

// TestPlaintextAndTLSStoreTheSame sends messages that go-smtp's DATA reader
// treats in particular ways (dot-stuffing, bare CR and LF, a dot and CR that
// go missing, a line that looks like the end but is not), large ones, and
// commands pipelined after the end of a message, in plaintext (read by
// fastData) and over STARTTLS (read by go-smtp's reader): the replies and
// the stored sources must be the same.
func TestPlaintextAndTLSStoreTheSame(t *testing.T) {
	t.Parallel()
	e, tc := startTLS(t, nil)
	long := strings.Repeat("TWFpbHNpbmsgcmVhZHMgZGF0YSBmYXN0Lg==\r\n", 3000)
	messages := []string{
		"Subject: plain\r\n\r\nHello.\r\n",
		"Subject: dots\r\n\r\n..stuffed\r\n.unstuffed\r\n...\r\n",
		".first line is dotted\r\n\r\nbody\r\n",
		"Subject: bare\r\n\r\nbare\rCR and bare\nLF\r\n\r\r\nCR CR LF\r\n",
		"Subject: quirks\r\n\r\n.\rgone\r\n.\r\r\nnot the end\r\n..\r\n",
		"Subject: long\r\n\r\n" + long,
		"Subject: long dotted\r\n\r\n" + strings.ReplaceAll(long, "\r\n", "\r\n..") + "\r\n",
	}
	send := func(w *wireSession, rcpt string) (codes []string) {
		for i, m := range messages {
			if i%2 == 0 { // the next transaction's commands follow the message in one write
				w.send(fmt.Sprintf("MAIL FROM:<app@example.com>\r\nRCPT TO:<%s%d@acme.test>\r\nDATA\r\n", rcpt, i))
				codes = append(codes, w.reply(), w.reply(), w.reply())
			}
			next := ""
			if i%2 == 0 && i+1 < len(messages) {
				next = fmt.Sprintf("MAIL FROM:<app@example.com>\r\nRCPT TO:<%s%d@acme.test>\r\nDATA\r\n", rcpt, i+1)
			}
			w.send(m + ".\r\n" + next)
			codes = append(codes, w.reply())
			if next != "" {
				codes = append(codes, w.reply(), w.reply(), w.reply())
			}
		}
		w.send("QUIT\r\n")
		return append(codes, w.reply())
	}
	sameRepliesPlainAndTLS(t, e.SMTP, tc, send)
	for i := range messages {
		p := items(t, e, testenv.AcmeKey, fmt.Sprintf("recipient=plain%d@acme.test", i))
		s := items(t, e, testenv.AcmeKey, fmt.Sprintf("recipient=tls%d@acme.test", i))
		if len(p) != 1 || len(s) != 1 {
			t.Fatalf("message %d: stored %d in plaintext, %d over TLS; want 1 each", i, len(p), len(s))
		}
		pr, sr := rawOf(t, e, testenv.AcmeKey, p[0]["id"].(string)), rawOf(t, e, testenv.AcmeKey, s[0]["id"].(string))
		if pr != sr {
			t.Errorf("message %d stored differently:\nplaintext %.200q\nTLS       %.200q", i, pr, sr)
		}
	}
}

// TestTooLargeLongLineSameAsTLS sends a message past MaxMessageBytes whose
// line goes on past go-smtp's line limit, then NOOP. go-smtp drains the rest
// of a message refused as too large, counting the line from its start: 552,
// then 500 "Too long line" and the end of the connection. After fastData
// read part of the message, go-smtp's count must come out the same.
func TestTooLargeLongLineSameAsTLS(t *testing.T) {
	t.Parallel()
	e, tc := startTLS(t, func(c *config.Config) { c.MaxMessageBytes = 2000 })
	line := strings.Repeat("A", 1<<20+50)
	send := func(w *wireSession, rcpt string) []string {
		w.send("MAIL FROM:<app@example.com>\r\nRCPT TO:<" + rcpt + "@acme.test>\r\nDATA\r\n")
		codes := []string{w.reply(), w.reply(), w.reply()}
		w.send("Subject: big\r\n\r\n" + line + "\r\n.\r\nNOOP\r\n")
		codes = append(codes, w.reply())
		next, err := w.tp.ReadLine()
		if err != nil {
			return append(codes, "closed")
		}
		return append(codes, next[:min(3, len(next))])
	}
	sameRepliesPlainAndTLS(t, e.SMTP, tc, send)
}
