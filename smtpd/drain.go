package smtpd

import (
	"net"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// Draining on shutdown. go-smtp's Shutdown closes the listener and then waits
// for every connection to end, so one idle client (a pooled sender between
// messages, or one that connected and said nothing) held SIGTERM up for the
// whole shutdown timeout, after which mailsink exited with an error. The
// server therefore tracks its connections: once draining, a connection
// outside a transaction gets at most idleGrace to send each command (time
// for the QUIT after a 250), after which go-smtp answers 421 4.4.2 and closes
// it; a transaction already under way keeps its deadlines and finishes; a new
// MAIL is refused with 421 4.3.2.

// idleGrace is how long a connection outside a transaction may wait before
// each command while the server drains.
const idleGrace = time.Second

// errShuttingDown refuses a new transaction while the server drains.
var errShuttingDown = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 3, 2},
	Message: "Service shutting down, try again later"}

// drainState is the server's set of open connections.
type drainState struct {
	mu       sync.Mutex
	conns    map[*drainConn]struct{}
	draining bool
	// stopping is closed when draining starts: messages waiting for a
	// large-transfer slot give up then (smtpd.go).
	stopping chan struct{}
	// max bounds the open connections; 0 means no bound.
	max int
}

// drain starts draining: connections outside a transaction have idleGrace
// to send their next command.
func (d *drainState) drain() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.draining {
		close(d.stopping)
	}
	d.draining = true
	deadline := time.Now().Add(idleGrace)
	for c := range d.conns {
		if !c.inTx {
			c.Conn.SetReadDeadline(deadline)
		}
	}
}

// drainListener hands out tracked connections.
type drainListener struct {
	net.Listener
	state *drainState
	// refused, when not nil, is called for each connection refused
	// because of the limit.
	refused func()
}

// Accept returns the next connection. Past the connection limit it answers
// 421 itself, closes the connection and waits for the next one.
func (l *drainListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		dc := &drainConn{Conn: c, state: l.state}
		l.state.mu.Lock()
		full := l.state.max > 0 && len(l.state.conns) >= l.state.max
		if !full {
			l.state.conns[dc] = struct{}{}
		}
		l.state.mu.Unlock()
		if !full {
			return dc, nil
		}
		if l.refused != nil {
			l.refused()
		}
		go refuse(c)
	}
}

// refuse tells a client over the connection limit to come back later.
func refuse(c net.Conn) {
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("421 4.7.0 Too many connections, try again later\r\n"))
	c.Close()
}

// drainConn is a connection that knows whether it is in a transaction.
type drainConn struct {
	net.Conn
	state *drainState
	inTx  bool // guarded by state.mu
}

// SetReadDeadline shortens go-smtp's per-command deadline to idleGrace while
// the server drains and the connection is outside a transaction.
func (c *drainConn) SetReadDeadline(t time.Time) error {
	c.state.mu.Lock()
	if c.state.draining && !c.inTx {
		if limit := time.Now().Add(idleGrace); t.IsZero() || t.After(limit) {
			t = limit
		}
	}
	c.state.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *drainConn) Close() error {
	c.state.mu.Lock()
	delete(c.state.conns, c)
	c.state.mu.Unlock()
	return c.Conn.Close()
}

// abort answers reply (without its CRLF) and closes the connection, for a
// message whose transfer went wrong midway. c may be nil.
func (c *drainConn) abort(reply string) {
	if c == nil {
		return
	}
	c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
	c.Conn.Write([]byte(reply + "\r\n"))
	c.Close()
}

// begin marks the start of a transaction; it reports false when the server
// drains and no transaction may start. c may be nil (a connection the
// server does not track).
func (c *drainConn) begin() bool {
	if c == nil {
		return true
	}
	c.state.mu.Lock()
	defer c.state.mu.Unlock()
	if c.state.draining {
		return false
	}
	c.inTx = true
	return true
}

// end marks the end of a transaction (after its reply is written); while
// draining, the connection then has idleGrace for its next command.
func (c *drainConn) end() {
	if c == nil {
		return
	}
	c.state.mu.Lock()
	defer c.state.mu.Unlock()
	c.inTx = false
	if c.state.draining {
		c.Conn.SetReadDeadline(time.Now().Add(idleGrace))
	}
}
