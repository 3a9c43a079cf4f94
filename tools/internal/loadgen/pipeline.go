package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-smtp"
)

// smtpConn is one SMTP client connection of a load run.
type smtpConn interface {
	// send runs one transaction for message i of m, raw being its bytes.
	send(m *Messages, i int, raw []byte) error
	// quit ends the session politely; close drops the connection.
	quit() error
	close() error
}

// goSMTPConn sends with go-smtp's client: one command, one reply, as most
// client libraries do.
type goSMTPConn struct{ c *smtp.Client }

func (g goSMTPConn) send(m *Messages, i int, raw []byte) error { return send(g.c, m, i, raw) }
func (g goSMTPConn) quit() error                               { return g.c.Quit() }
func (g goSMTPConn) close() error                              { return g.c.Close() }

// rawConn is the load tool's own minimal client: it writes each message
// with its dot-stuffing done in one pass, where go-smtp's client goes
// through net/textproto's byte-at-a-time writer (about 1 ms of the tool's
// CPU per 100 KB message here, as much as mailsink's own cost). It sends
// one command and waits for its reply, as most client libraries do, or,
// with pipeline, pipelines (RFC 2920): MAIL, every RCPT and DATA go out in
// one write, and the message with its end marker in another, so a
// transaction costs the client two writes whatever the number of
// recipients.
type rawConn struct {
	conn     net.Conn
	r        *bufio.Reader
	w        *bufio.Writer
	pipeline bool
}

// The client waits as long as RFC 5321 (section 4.5.3.2) has an SMTP
// client wait, as a patient MTA does: a server that is busy may keep a
// client waiting (mailsink takes large messages a few at a time, and 100
// of 25 MB at once wait for their turn in the middle of DATA), and a
// shorter deadline than real clients keep would count that wait as a
// failure the server did not make.
const (
	// dialTimeout bounds the TCP connect, which RFC 5321 leaves to the
	// system.
	dialTimeout = time.Minute
	// replyTimeout is the wait for the greeting and for the reply to a
	// command: 5 minutes (2 for DATA's, but one figure will do).
	replyTimeout = 5 * time.Minute
	// blockTimeout is the wait for each write of the message's content.
	blockTimeout = 3 * time.Minute
	// doneTimeout is the wait for the reply to the end of the content.
	doneTimeout = 10 * time.Minute
)

// blockWriter writes to conn, each write with its own deadline of
// blockTimeout.
type blockWriter struct{ conn net.Conn }

func (w blockWriter) Write(p []byte) (int, error) {
	w.conn.SetWriteDeadline(time.Now().Add(blockTimeout))
	return w.conn.Write(p)
}

func dialRaw(ctx context.Context, addr string, pipeline bool) (*rawConn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &rawConn{conn: conn, r: bufio.NewReader(conn), w: bufio.NewWriterSize(blockWriter{conn}, 64<<10), pipeline: pipeline}
	if _, _, err := c.expect(220); err != nil {
		conn.Close()
		return nil, fmt.Errorf("greeting: %w", err)
	}
	c.w.WriteString("EHLO loadgen.bench.test\r\n")
	if err := c.w.Flush(); err != nil {
		conn.Close()
		return nil, err
	}
	_, text, err := c.expect(250)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("EHLO: %w", err)
	}
	if pipeline && !strings.Contains(strings.ToUpper(text), "PIPELINING") {
		conn.Close()
		return nil, fmt.Errorf("the server does not offer PIPELINING")
	}
	return c, nil
}

func (c *rawConn) send(m *Messages, i int, raw []byte) error {
	rcpts := m.RecipientsOf(i)
	to := make([]string, len(rcpts))
	for j, k := range rcpts {
		to[j] = m.Recipient(k)
	}
	return c.transaction("sender@bench.test", to, raw)
}

// transaction sends raw from one sender to the recipients.
func (c *rawConn) transaction(from string, to []string, raw []byte) error {
	// Every reply is read even after a failure, so the next transaction
	// starts in step.
	var first error
	var want []string // the commands written and not yet answered
	command := func(line, what string) {
		c.w.WriteString(line)
		want = append(want, what)
		if c.pipeline {
			return
		}
		c.replies(&want, &first)
	}
	command("MAIL FROM:<"+from+">\r\n", "MAIL")
	for _, rcpt := range to {
		command("RCPT TO:<"+rcpt+">\r\n", "RCPT")
	}
	command("DATA\r\n", "DATA")
	c.replies(&want, &first)
	if first != nil {
		return first
	}
	writeDotStuffed(c.w, raw)
	c.w.WriteString(".\r\n")
	if err := c.w.Flush(); err != nil {
		return err
	}
	if _, _, err := c.expectWithin(250, doneTimeout); err != nil {
		return fmt.Errorf("end of DATA: %w", err)
	}
	return nil
}

// replies flushes the commands written and reads a reply to each of want,
// keeping the first failure in first.
func (c *rawConn) replies(want *[]string, first *error) {
	if err := c.w.Flush(); err != nil && *first == nil {
		*first = err
	}
	for _, what := range *want {
		code := 250
		if what == "DATA" {
			code = 354
		}
		if _, _, err := c.expect(code); err != nil && *first == nil {
			*first = fmt.Errorf("%s: %w", what, err)
		}
	}
	*want = (*want)[:0]
}

// auth authenticates with AUTH PLAIN and an API key as the password, so
// that every recipient of the session lands in that key's account.
func (c *rawConn) auth(key string) error {
	c.w.WriteString("AUTH PLAIN " + base64.StdEncoding.EncodeToString([]byte("\x00bench\x00"+key)) + "\r\n")
	if err := c.w.Flush(); err != nil {
		return err
	}
	_, _, err := c.expect(235)
	return err
}

func (c *rawConn) quit() error {
	c.w.WriteString("QUIT\r\n")
	if err := c.w.Flush(); err != nil {
		return err
	}
	_, _, err := c.expect(221)
	return err
}

func (c *rawConn) close() error { return c.conn.Close() }

// expect reads one reply, all its lines, and fails unless its code is
// want: a command's reply, waited for replyTimeout.
func (c *rawConn) expect(want int) (int, string, error) {
	return c.expectWithin(want, replyTimeout)
}

// expectWithin is expect with a wait of d.
func (c *rawConn) expectWithin(want int, d time.Duration) (int, string, error) {
	c.conn.SetReadDeadline(time.Now().Add(d))
	var text strings.Builder
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			return 0, text.String(), err
		}
		line = strings.TrimRight(line, "\r\n")
		if len(line) < 3 {
			return 0, text.String(), fmt.Errorf("short reply line %q", line)
		}
		code, err := strconv.Atoi(line[:3])
		if err != nil {
			return 0, text.String(), fmt.Errorf("bad reply line %q", line)
		}
		text.WriteString(line[min(4, len(line)):])
		text.WriteString("\n")
		if len(line) == 3 || line[3] == ' ' {
			if code != want {
				return code, text.String(), fmt.Errorf("%d %s", code, strings.TrimSpace(text.String()))
			}
			return code, text.String(), nil
		}
	}
}

// writeDotStuffed writes raw as DATA content: a '.' that starts a line is
// doubled, and the content ends with CRLF.
func writeDotStuffed(w *bufio.Writer, raw []byte) {
	if len(raw) > 0 && raw[0] == '.' {
		w.WriteByte('.')
	}
	for {
		i := bytes.Index(raw, []byte("\n."))
		if i < 0 {
			break
		}
		w.Write(raw[:i+1])
		w.WriteByte('.')
		raw = raw[i+1:]
	}
	w.Write(raw)
	if !bytes.HasSuffix(raw, []byte("\r\n")) {
		w.WriteString("\r\n")
	}
}
