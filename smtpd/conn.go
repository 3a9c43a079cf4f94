package smtpd

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/pires/go-proxyproto"

	"github.com/mailsink/mailsink/internal/clientaddr"
)

// The listener and connection under go-smtp. They only hold back, time and
// end what go-smtp writes and reads; every reply on an accepted connection is
// go-smtp's, but for two that come before go-smtp reads anything: the 421 to
// a connection past the limits, and the 554 to plaintext on the
// implicit-TLS port. They also read the PROXY protocol header of a trusted
// proxy, so that go-smtp and the limits see the client's address, and sit
// under TLS (go-smtp wraps them for STARTTLS; a tls.Listener for implicit
// TLS), so they see only encrypted bytes there.
//
// Draining on shutdown: go-smtp's Shutdown closes the listener and then waits
// for every connection to end, so one idle client (a pooled sender between
// messages, or one that connected and said nothing) would hold SIGTERM up for
// the whole shutdown timeout. The server therefore tracks its connections:
// once draining, a connection outside a transaction gets at most idleGrace to
// send each command (time for the QUIT after a 250), after which go-smtp
// answers 421 4.4.2 and closes it; a transaction already under way keeps its
// deadlines and finishes; a new MAIL is refused with 421 4.3.2.

// idleGrace is how long a connection outside a transaction may wait before
// each command while the server drains.
const idleGrace = time.Second

// maxHeldReplies bounds the buffer a conn keeps between flushes; an EHLO
// reply or a pipelined group's replies fit many times over.
const maxHeldReplies = 16 << 10

// errShuttingDown refuses a new transaction while the server drains.
var errShuttingDown = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 3, 2},
	Message: "Service shutting down, try again later"}

// connSet is the server's set of open connections.
type connSet struct {
	mu       sync.Mutex
	conns    map[*conn]struct{}
	draining bool
	// stopping is closed when draining starts: messages waiting for a
	// large-transfer slot give up then.
	stopping chan struct{}
	// limits bounds the open connections, in total, per client address
	// and per network; the last two apply to loopback clients only with
	// limitLoopback (Config.LimitLoopback).
	limits        ConnectionLimits
	limitLoopback bool
	byAddr        map[netip.Addr]int   // open connections per client address
	byNet         map[netip.Prefix]int // open connections per network
	// idle bounds each read of a message transfer (the read timeout);
	// 0 means no bound.
	idle time.Duration
}

// ConnectionLimits bound the SMTP connections open at once; a connection
// past one of them is answered 421 4.7.0 and closed. 0 means no bound.
type ConnectionLimits struct {
	Total int
	// PerAddress and PerNetwork bound the connections of one client
	// address, and of one network (an IPv4 /24, an IPv6 /64), so that a
	// few clients cannot take every connection.
	PerAddress, PerNetwork int
}

func newConnSet(limits ConnectionLimits, limitLoopback bool, idle time.Duration) *connSet {
	return &connSet{conns: map[*conn]struct{}{}, stopping: make(chan struct{}), limits: limits,
		limitLoopback: limitLoopback, byAddr: map[netip.Addr]int{}, byNet: map[netip.Prefix]int{}, idle: idle}
}

// network is the network an address counts in for PerNetwork: its /24
// (IPv4) or /64 (IPv6), or the zero prefix when ip is not valid.
func network(ip netip.Addr) netip.Prefix {
	bits := 64
	if ip.Is4() {
		bits = 24
	}
	p, _ := ip.Prefix(bits)
	return p
}

// add tracks c unless the server, c's address or c's network is full; it
// reports the refusal's reply, or "" when c is tracked.
func (s *connSet) add(c *conn) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.limits
	shared := s.limitLoopback || !c.ip.IsLoopback()
	switch {
	case l.Total > 0 && len(s.conns) >= l.Total:
		return "421 4.7.0 Too many connections, try again later"
	case shared && l.PerAddress > 0 && s.byAddr[c.ip] >= l.PerAddress:
		return "421 4.7.0 Too many connections from your address, try again later"
	case shared && l.PerNetwork > 0 && s.byNet[c.network] >= l.PerNetwork:
		return "421 4.7.0 Too many connections from your network, try again later"
	}
	s.conns[c] = struct{}{}
	s.byAddr[c.ip]++
	s.byNet[c.network]++
	return ""
}

// remove forgets c.
func (s *connSet) remove(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.conns[c]; !ok {
		return
	}
	delete(s.conns, c)
	if s.byAddr[c.ip]--; s.byAddr[c.ip] <= 0 {
		delete(s.byAddr, c.ip)
	}
	if s.byNet[c.network]--; s.byNet[c.network] <= 0 {
		delete(s.byNet, c.network)
	}
}

// drain starts draining: connections outside a transaction have idleGrace
// to send their next command.
func (s *connSet) drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.draining {
		close(s.stopping)
	}
	s.draining = true
	for c := range s.conns {
		if !c.inTx {
			c.Conn.SetReadDeadline(time.Now().Add(idleGrace))
		}
	}
}

// listener hands out tracked connections.
type listener struct {
	net.Listener
	set *connSet
	// refused, when not nil, is called for each connection refused
	// because of the limit.
	refused func()
	// trusted are the peers whose PROXY protocol header is believed.
	trusted clientaddr.Trusted
	// implicitTLS: the connections speak TLS from their first byte (a
	// tls.Listener wraps this one).
	implicitTLS bool
}

// proxyHeaderWait is how long a connection from a trusted proxy may take
// to send its PROXY header. SMTP servers speak first, so a client of a
// trusted address that sends no header gets its greeting this late: a proxy
// sends the header as soon as it connects.
const proxyHeaderWait = time.Second

// Accept returns the next connection. Past the connection limits it
// answers 421 itself, closes the connection (which go-smtp never sees) and
// waits for the next one. A connection from a trusted proxy is admitted on
// its first read instead (conn.admit), once its PROXY header names the
// client: Accept must not wait for one client's header.
func (l *listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &conn{Conn: nc, set: l.set, refused: l.refused, implicitTLS: l.implicitTLS}
		ip := c.setAddr()
		if ip.IsValid() && l.trusted.Contains(ip) {
			c.Conn = proxyproto.NewConn(nc, proxyproto.WithPolicy(proxyproto.USE), proxyproto.SetReadHeaderTimeout(proxyHeaderWait))
			c.admitLater = true
			return c, nil
		}
		reply := l.set.add(c)
		if reply == "" {
			return c, nil
		}
		if l.refused != nil {
			l.refused()
		}
		go refuse(nc, reply, l.implicitTLS)
	}
}

// refuse tells a client over a connection limit to come back later; over
// implicit TLS, where a plaintext reply would be garbage, it just closes.
func refuse(c net.Conn, reply string, implicitTLS bool) {
	if !implicitTLS {
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		c.Write([]byte(reply + "\r\n"))
	}
	c.Close()
}

// trackedConn returns the conn under nc, which may be a TLS connection over
// it (STARTTLS, implicit TLS), or nil when nc is not one of the listener's.
func trackedConn(nc net.Conn) *conn {
	if t, ok := nc.(*tls.Conn); ok {
		nc = t.NetConn()
	}
	c, _ := nc.(*conn)
	return c
}

// conn is one accepted connection. It holds go-smtp's replies until go-smtp
// reads again (or closes), then writes them in one system call: go-smtp
// flushes every reply line with its own write, and on a small VM each write
// costs about as much CPU as parsing a 2 KB message. The server only waits
// for the client after reading, so a held reply reaches the client before
// the server waits for it, and a pipelining client (RFC 2920) gets the
// replies to its whole command group in one write.
//
// A conn also ends reading once the stream's position is lost: after a read
// failed (a timeout in the middle of a message), or after the session asked
// it to (hangUp, when a message transfer went wrong), the replies held are
// written and every read returns net.ErrClosed, which makes go-smtp close
// the connection; what the client sends next is never read as commands.
type conn struct {
	net.Conn
	set  *connSet
	addr string // the client's address (after admit, when admitLater)
	// ip and network are addr's IP address (invalid when addr is not
	// one) and network, set with addr.
	ip      netip.Addr
	network netip.Prefix
	inTx    bool // guarded by set.mu
	// admitLater: the connection comes from a trusted proxy; its first
	// read reads the PROXY header and admits it (or refuses it). Only
	// go-smtp's connection goroutine reads, so the fields of the first
	// read need no lock.
	admitLater  bool
	admitted    bool
	refused     func()
	implicitTLS bool
	readAny     bool // a read returned bytes
	// last is the last byte a read returned, and armed makes the next
	// read fail with errHandOver instead of reading (fastdata.go). Only
	// go-smtp's connection goroutine reads, and Data, which runs in it for
	// DATA, arms.
	last  byte
	armed bool

	// mu guards the fields below: go-smtp's Close may come from another
	// goroutine (Server.Close) and Data runs beside go-smtp's command loop
	// for BDAT.
	mu      sync.Mutex
	pending []byte    // replies not written yet
	lastAt  int       // where the last write begins in pending
	unread  []byte    // bytes to read before the socket's (fastData.handBack)
	werr    error     // the error of the last failed write
	ended   bool      // reads return net.ErrClosed
	lost    bool      // a read of the connection failed (EOF included)
	closed  bool      // Close has closed the connection
	limit   time.Time // a message transfer's deadline, or zero
	// transfer is set while a message is transferred (startTransfer to
	// endTransfer). perRead gives every read the idle deadline (readDeadline)
	// from the transfer's start until go-smtp times its first command after
	// the transfer's end, so that the rest of a refused message, which
	// go-smtp reads and drops, is bounded the same way. awaitingCommand is
	// set when go-smtp times a command and cleared when a read returns
	// bytes: a read that times out with it set waited for a command.
	transfer, perRead, awaitingCommand bool
	// lastReply: a transfer timed out, and the connection writes one more
	// reply at most (over TLS, go-smtp would answer the timeout twice:
	// tls.Conn returns a read error again instead of reading).
	lastReply, replied bool
	// held is pending's first array: a connection's replies (the EHLO
	// reply is the longest of them) fit without allocating.
	held [256]byte
}

// setAddr sets the client's address from the connection's peer (after a
// PROXY header, the client it names) and returns it as an IP, invalid when
// the peer is not an IP address. A TCP peer's address is taken as it is,
// without formatting and parsing it again.
func (c *conn) setAddr() netip.Addr {
	var ip netip.Addr
	if ta, ok := c.Conn.RemoteAddr().(*net.TCPAddr); ok {
		ip = ta.AddrPort().Addr().Unmap()
		c.addr = ip.String()
	} else {
		c.addr = clientaddr.Host(c.Conn.RemoteAddr().String())
		ip, _ = netip.ParseAddr(c.addr)
	}
	c.ip = ip.Unmap().WithZone("")
	c.network = network(c.ip)
	return ip
}

// handshakeFailed starts go-smtp's reply to a STARTTLS whose handshake
// failed. The client's bytes were TLS garbage or a TLS client gave up, so
// the stream's position is lost: the connection ends after this reply.
var handshakeFailed = []byte("550 5.0.0 Handshake error")

func (c *conn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.werr != nil {
		return 0, c.werr
	}
	if c.lastReply {
		if c.replied {
			return 0, net.ErrClosed
		}
		c.replied = true
	}
	if bytes.HasPrefix(b, handshakeFailed) {
		c.ended = true
	}
	if c.pending == nil {
		c.pending = c.held[:0]
	}
	c.lastAt = len(c.pending)
	c.pending = append(c.pending, b...)
	return len(b), nil
}

// quiet reports whether nothing the client sent waits to be read: nothing
// handed back (unread) and, on a TCP connection, nothing in the socket. A
// connection of another kind (a PROXY protocol one, which buffers) is not
// known to be quiet. Only go-smtp's connection goroutine reads.
func (c *conn) quiet() bool {
	c.mu.Lock()
	handedBack := len(c.unread) > 0
	c.mu.Unlock()
	tc, ok := c.Conn.(*net.TCPConn)
	if handedBack || !ok {
		return false
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	quiet := false
	raw.Read(func(fd uintptr) bool {
		quiet = socketEmpty(fd)
		return true // look once, never wait
	})
	return quiet
}

// retract takes back the last write when it is held still and starts with
// prefix (a reply of go-smtp's: one write a line), and reports whether it
// did.
func (c *conn) retract(prefix string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastAt >= len(c.pending) || !bytes.HasPrefix(c.pending[c.lastAt:], []byte(prefix)) {
		return false
	}
	c.pending = c.pending[:c.lastAt]
	return true
}

// notTLS answers a client that speaks plaintext on the implicit-TLS port.
const notTLS = "554 5.7.0 This port expects TLS from the first byte (implicit TLS); plain SMTP and STARTTLS are on the SMTP port\r\n"

// admit tracks a connection from a trusted proxy under the client address
// its PROXY header names (the proxy's own, without a header), or refuses it
// past the connection limits; it reports false when refused.
func (c *conn) admit() bool {
	c.admitted = true
	c.setAddr() // reads the header
	reply := c.set.add(c)
	if reply == "" {
		return true
	}
	if c.refused != nil {
		c.refused()
	}
	c.mu.Lock()
	c.pending = nil // go-smtp's greeting
	c.ended = true
	c.mu.Unlock()
	refuse(c.Conn, reply, c.implicitTLS)
	return false
}

// Read writes the held replies, then reads: what was given back first
// (unread), then the socket.
func (c *conn) Read(b []byte) (int, error) {
	if c.admitLater && !c.admitted && !c.admit() {
		return 0, net.ErrClosed
	}
	if c.armed {
		return 0, errHandOver
	}
	c.mu.Lock()
	err := c.flushLocked()
	ended := c.ended
	n := 0
	if err == nil && !ended && len(c.unread) > 0 {
		n = copy(b, c.unread)
		c.unread = c.unread[n:]
		c.awaitingCommand = false
	}
	perRead, limit := c.perRead, c.limit
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if ended {
		return 0, net.ErrClosed
	}
	if n > 0 {
		c.last = b[n-1]
		return n, nil
	}
	if perRead && (c.set.idle > 0 || !limit.IsZero()) {
		c.Conn.SetReadDeadline(c.readDeadline(limit))
	}
	n, err = c.Conn.Read(b)
	if n > 0 {
		c.last = b[n-1]
	}
	if c.implicitTLS && !c.readAny && n > 0 {
		c.readAny = true
		if b[0] != 0x16 { // a TLS handshake record starts every TLS connection
			c.Conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
			c.Conn.Write([]byte(notTLS))
			n, err = 0, net.ErrClosed
		}
	}
	c.mu.Lock()
	if n > 0 {
		c.awaitingCommand = false
	}
	if err != nil {
		c.ended, c.lost = true, true
		if perRead && !c.awaitingCommand && errors.Is(err, os.ErrDeadlineExceeded) {
			err = errTransferTimeout
			c.lastReply = true
		}
	}
	c.mu.Unlock()
	return n, err
}

// errTransferTimeout is what a read in the middle of a message transfer
// answers once it times out (idle past the read timeout, or past the
// transfer's deadline). It is go-smtp's reply too where go-smtp answers a
// failed read itself (a BDAT chunk): go-smtp would answer a plain timeout
// there with a permanent 554 naming the socket. A read for the next command
// between two BDAT chunks keeps the plain timeout, which go-smtp answers
// 421 4.4.2 as well.
var errTransferTimeout = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 4, 2}, Message: "Message transfer timed out"}

// readDeadline is the deadline of a read during a transfer whose deadline
// is limit (zero: none): the read timeout from now, or limit if sooner.
func (c *conn) readDeadline(limit time.Time) time.Time {
	if c.set.idle <= 0 {
		return limit
	}
	d := time.Now().Add(c.set.idle)
	if !limit.IsZero() && limit.Before(d) {
		d = limit
	}
	return d
}

// readFailed reports whether a read of the connection failed or met its
// end. c may be nil.
func (c *conn) readFailed() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lost
}

// Close writes the held replies, then closes. go-smtp closes twice after
// QUIT; the second call only reports net.ErrClosed.
func (c *conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return net.ErrClosed
	}
	c.closed = true
	c.mu.Unlock()
	c.set.remove(c)
	c.mu.Lock()
	c.flushLocked()
	c.mu.Unlock()
	return c.Conn.Close()
}

func (c *conn) flushLocked() error {
	if len(c.pending) > 0 && c.werr == nil {
		_, c.werr = c.Conn.Write(c.pending)
	}
	if cap(c.pending) > maxHeldReplies {
		c.pending = nil
	}
	c.pending, c.lastAt = c.pending[:0], 0
	return c.werr
}

// SetReadDeadline is how go-smtp times each command (and only that). While
// a message is transferred the deadline is never later than the transfer's
// (BDAT sends a message in several commands); while the server drains and
// the connection is outside a transaction, it is at most idleGrace away.
func (c *conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	if c.closed { // go-smtp's read for the command after QUIT
		c.mu.Unlock()
		return net.ErrClosed
	}
	if !c.limit.IsZero() && (t.IsZero() || t.After(c.limit)) {
		t = c.limit
	}
	c.awaitingCommand = true
	if !c.transfer {
		c.perRead = false
	}
	c.mu.Unlock()
	c.set.mu.Lock()
	if c.set.draining && !c.inTx {
		if limit := time.Now().Add(idleGrace); t.IsZero() || t.After(limit) {
			t = limit
		}
	}
	c.set.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

// SetWriteDeadline sets the deadline of the writes to come. A deadline that
// has passed ends writing (tls.Conn.Close sets one once it has written its
// close_notify), so the replies held are written first: else a TLS client
// would never get the reply to QUIT.
func (c *conn) SetWriteDeadline(t time.Time) error {
	if !t.IsZero() && !t.After(time.Now()) {
		c.mu.Lock()
		c.flushLocked()
		c.mu.Unlock()
	}
	return c.Conn.SetWriteDeadline(t)
}

// startTransfer starts timing the message being transferred, which replaces
// go-smtp's per-command timing: every read must come within the read
// timeout (the idle cutoff), and the whole transfer by deadline (zero:
// none). Called again, it moves deadline. c may be nil (a connection the
// server does not track).
func (c *conn) startTransfer(deadline time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.limit = deadline
	c.transfer, c.perRead = true, true
	c.mu.Unlock()
	if c.set.idle > 0 || !deadline.IsZero() {
		c.Conn.SetReadDeadline(c.readDeadline(deadline))
	}
}

// endTransfer lifts the transfer's deadline; go-smtp sets its own before the
// next command.
func (c *conn) endTransfer() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.limit = time.Time{}
	c.transfer = false
	c.mu.Unlock()
}

// hangUp ends the connection once go-smtp has written its next reply.
func (c *conn) hangUp() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.ended = true
	c.mu.Unlock()
}

// drop closes the connection at once, without writing the replies held:
// a fault rule's disconnect. Later writes and reads fail.
func (c *conn) drop() {
	c.mu.Lock()
	c.pending = c.pending[:0]
	c.werr = net.ErrClosed
	c.ended = true
	c.mu.Unlock()
	c.Conn.Close()
}

// begin marks the start of a transaction; it reports false when the server
// drains and no transaction may start. c may be nil.
func (c *conn) begin() bool {
	if c == nil {
		return true
	}
	c.set.mu.Lock()
	defer c.set.mu.Unlock()
	if c.set.draining {
		return false
	}
	c.inTx = true
	return true
}

// end marks the end of a transaction (after its reply is written); while
// draining, the connection then has idleGrace for its next command.
func (c *conn) end() {
	if c == nil {
		return
	}
	c.set.mu.Lock()
	defer c.set.mu.Unlock()
	c.inTx = false
	if c.set.draining {
		c.Conn.SetReadDeadline(time.Now().Add(idleGrace))
	}
}
