package loadgen

import (
	"bufio"
	"bytes"
	"context"
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

// pipeConn is a minimal client that pipelines (RFC 2920): MAIL, every RCPT
// and DATA go out in one write, and the message with its end marker in
// another, so a transaction costs the client two writes whatever the
// number of recipients.
type pipeConn struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
}

func dialPipelined(ctx context.Context, addr string) (*pipeConn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &pipeConn{conn: conn, r: bufio.NewReader(conn), w: bufio.NewWriterSize(conn, 64<<10)}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
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
	if !strings.Contains(strings.ToUpper(text), "PIPELINING") {
		conn.Close()
		return nil, fmt.Errorf("the server does not offer PIPELINING")
	}
	return c, nil
}

func (c *pipeConn) send(m *Messages, i int, raw []byte) error {
	c.conn.SetDeadline(time.Now().Add(60 * time.Second))
	rcpts := m.RecipientsOf(i)
	c.w.WriteString("MAIL FROM:<sender@bench.test>\r\n")
	for _, k := range rcpts {
		c.w.WriteString("RCPT TO:<" + m.Recipient(k) + ">\r\n")
	}
	c.w.WriteString("DATA\r\n")
	if err := c.w.Flush(); err != nil {
		return err
	}
	// Every reply is read even after a failure, so the next transaction
	// starts in step.
	var first error
	check := func(what string, want int) {
		if _, _, err := c.expect(want); err != nil && first == nil {
			first = fmt.Errorf("%s: %w", what, err)
		}
	}
	check("MAIL", 250)
	for range rcpts {
		check("RCPT", 250)
	}
	check("DATA", 354)
	if first != nil {
		return first
	}
	writeDotStuffed(c.w, raw)
	c.w.WriteString(".\r\n")
	if err := c.w.Flush(); err != nil {
		return err
	}
	if _, _, err := c.expect(250); err != nil {
		return fmt.Errorf("end of DATA: %w", err)
	}
	return nil
}

func (c *pipeConn) quit() error {
	c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	c.w.WriteString("QUIT\r\n")
	if err := c.w.Flush(); err != nil {
		return err
	}
	_, _, err := c.expect(221)
	return err
}

func (c *pipeConn) close() error { return c.conn.Close() }

// expect reads one reply, all its lines, and fails unless its code is want.
func (c *pipeConn) expect(want int) (int, string, error) {
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
