// Package smtpd is mailsink's SMTP listener: a go-smtp backend that routes
// each RCPT to an account (by AUTH, by domain, or the only account) and hands
// each message to ingest. Store failures answer 451 4.3.0 so senders retry.
package smtpd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/mailsink/mailsink/accounts"
	"github.com/mailsink/mailsink/ingest"
	"github.com/mailsink/mailsink/internal/authlimit"
	"github.com/mailsink/mailsink/metrics"
	"github.com/mailsink/mailsink/store"
)

// Config configures the SMTP server.
type Config struct {
	Addr              string
	Domain            string // the name in the greeting; "mailsink" when empty
	MaxMessageBytes   int64
	MaxRecipients     int
	AllowInsecureAuth bool
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	// StoreTimeout bounds how long one message may wait for the store.
	StoreTimeout time.Duration
	// DataTimeout bounds the whole DATA transfer of one message (ReadTimeout
	// bounds each command); 0 leaves DATA to ReadTimeout.
	DataTimeout time.Duration
	// MaxConnections bounds the connections open at once; more are
	// answered 421. 0 means no bound.
	MaxConnections int
	// MaxLargeTransfers bounds the messages over largeMessage bytes read
	// and stored at once; the others wait before reading past their first
	// largeMessage bytes. 0 means DefaultMaxLargeTransfers.
	MaxLargeTransfers int
	// AuthLimiter, when not nil, counts failed AUTHs per client address (the
	// password is an API key); an address over its limit gets 454 for every
	// key that has not worked from it before.
	AuthLimiter *authlimit.Limiter
	// Metrics, when not nil, counts connections and messages.
	Metrics *metrics.Metrics
}

// Server is a running SMTP listener.
type Server struct {
	cfg      Config
	accounts *accounts.Registry
	ingest   *ingest.Service
	log      *slog.Logger
	smtp     *smtp.Server
	ln       net.Listener
	drain    drainState
	// large holds a token per large message being read or stored.
	large chan struct{}
	// ctx is cancelled when Shutdown gives up waiting, ending store calls of
	// transactions still in flight.
	ctx    context.Context
	cancel context.CancelFunc
}

// New returns a Server; Start makes it listen.
func New(cfg Config, reg *accounts.Registry, ing *ingest.Service, log *slog.Logger) *Server {
	if cfg.Domain == "" {
		cfg.Domain = "mailsink"
	}
	if cfg.StoreTimeout == 0 {
		cfg.StoreTimeout = 30 * time.Second
	}
	if cfg.MaxLargeTransfers <= 0 {
		cfg.MaxLargeTransfers = DefaultMaxLargeTransfers
	}
	s := &Server{cfg: cfg, accounts: reg, ingest: ing, log: log, large: make(chan struct{}, cfg.MaxLargeTransfers)}
	s.drain.conns = map[*drainConn]struct{}{}
	s.drain.stopping = make(chan struct{})
	s.drain.max = cfg.MaxConnections
	s.ctx, s.cancel = context.WithCancel(context.Background())
	srv := smtp.NewServer(smtp.BackendFunc(s.newSession))
	srv.Addr = cfg.Addr
	srv.Domain = cfg.Domain
	if cfg.MaxMessageBytes > 0 {
		// go-smtp's DATA reader refuses a message of exactly MaxMessageBytes
		// (it fails before reading the end-of-data line), so it gets one
		// byte more; Mail and Data enforce the real limit, and replyConn
		// advertises the real one in EHLO.
		srv.MaxMessageBytes = cfg.MaxMessageBytes + 1
	}
	srv.MaxRecipients = cfg.MaxRecipients
	srv.AllowInsecureAuth = cfg.AllowInsecureAuth
	srv.ReadTimeout = cfg.ReadTimeout
	srv.WriteTimeout = cfg.WriteTimeout
	srv.EnableSMTPUTF8 = true
	// RFC 5322 caps lines at 998 characters, but applications under test
	// send longer ones (single-line HTML): a sink takes them.
	srv.MaxLineLength = maxLineLength
	srv.ErrorLog = slogAdapter{log}
	s.smtp = srv
	return s
}

// Start listens on the configured address and serves in the background. A
// bind error is returned at once.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return err
	}
	ln = &replyListener{Listener: ln, limit: s.cfg.MaxMessageBytes}
	ln = &drainListener{Listener: ln, state: &s.drain, refused: s.cfg.Metrics.SMTPConnectionRefused}
	s.ln = ln
	go func() {
		if err := s.smtp.Serve(ln); err != nil && !errors.Is(err, smtp.ErrServerClosed) {
			s.log.Error("smtp server stopped", "err", err)
		}
	}()
	return nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Shutdown stops accepting connections, lets transactions under way finish
// and closes idle connections (drain.go), and waits for open sessions to end
// until ctx is done; then it closes them.
func (s *Server) Shutdown(ctx context.Context) error {
	s.drain.drain()
	err := s.smtp.Shutdown(ctx)
	s.cancel()
	if err != nil {
		s.smtp.Close()
	}
	return err
}

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	s.cfg.Metrics.SMTPConnection()
	dc, _ := c.Conn().(*drainConn)
	return &session{srv: s, conn: dc, id: newSessionID(), remote: c.Conn().RemoteAddr().String()}, nil
}

// newSessionID returns a short random id that ties a session's log lines
// together.
func newSessionID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// session is one SMTP connection's state.
type session struct {
	srv     *Server
	conn    *drainConn // nil if the connection is not tracked
	id      string
	remote  string
	account *store.Account // set by a successful AUTH
	// mu guards the fields below: with BDAT, go-smtp runs Data in a
	// goroutine of its own while it goes on with commands (RSET, MAIL).
	mu    sync.Mutex
	from  string
	rcpts []ingest.Recipient
	size  int64 // the SIZE the client announced in MAIL, or 0
	// txDone is closed when the transaction is reset or the connection
	// closes, so that a Data waiting for a large-transfer slot gives up.
	txDone chan struct{}
}

// endTxLocked closes txDone; s.mu is held.
func (s *session) endTxLocked() {
	if s.txDone != nil {
		close(s.txDone)
		s.txDone = nil
	}
}

var _ smtp.AuthSession = (*session)(nil)

// AuthMechanisms lists PLAIN and LOGIN; the password is an API key.
func (s *session) AuthMechanisms() []string { return []string{sasl.Plain, sasl.Login} }

// Auth returns the SASL server of mech.
func (s *session) Auth(mech string) (sasl.Server, error) {
	switch mech {
	case sasl.Plain:
		return sasl.NewPlainServer(func(_, _, password string) error { return s.authenticate(password) }), nil
	case sasl.Login:
		return &loginServer{authenticate: s.authenticate}, nil
	}
	return nil, smtp.ErrAuthUnknownMechanism
}

func (s *session) authenticate(key string) error {
	acc, ok := s.srv.accounts.ByKey(key)
	if allowed, _ := s.srv.cfg.AuthLimiter.Attempt(s.remoteIP(), key, ok); !allowed {
		s.srv.cfg.Metrics.SMTPRejection("auth_limited")
		return &smtp.SMTPError{Code: 454, EnhancedCode: smtp.EnhancedCode{4, 7, 0},
			Message: "Too many failed authentications from this address, try again later"}
	}
	if !ok {
		s.srv.cfg.Metrics.SMTPRejection("auth_failed")
		s.srv.log.Info("smtp auth failed", "session", s.id, "remote", s.remote)
		return smtp.ErrAuthFailed
	}
	s.account = acc
	return nil
}

// remoteIP is the client's IP address.
func (s *session) remoteIP() string {
	host, _, err := net.SplitHostPort(s.remote)
	if err != nil {
		return s.remote
	}
	return host
}

// Mail starts a message. An empty or unusable reverse path is allowed: the
// From header decides the sender at DATA.
func (s *session) Mail(from string, opts *smtp.MailOptions) error {
	if limit := s.srv.cfg.MaxMessageBytes; limit > 0 && opts != nil && opts.Size > limit {
		s.srv.cfg.Metrics.SMTPMessage("too_large", 0, 0)
		return errTooLarge
	}
	if !s.conn.begin() {
		return errShuttingDown
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.from = from
	s.rcpts = nil
	s.size = 0
	s.endTxLocked()
	s.txDone = make(chan struct{})
	if opts != nil {
		s.size = opts.Size
	}
	return nil
}

// Rcpt routes one recipient to its account or refuses it.
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if !store.ValidAddress(to) {
		s.srv.cfg.Metrics.SMTPRejection("invalid_address")
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 3},
			Message: "Recipient address is not a valid address"}
	}
	acc := s.account
	if acc == nil {
		var ok bool
		if acc, ok = s.srv.accounts.ForRecipient(to); !ok {
			s.srv.cfg.Metrics.SMTPRejection("no_account")
			return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1},
				Message: "No account receives mail for this recipient; authenticate with an API key or use a configured domain"}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.rcpts {
		if strings.EqualFold(r.Address, to) && r.Account == acc {
			return nil // one email per distinct recipient
		}
	}
	s.rcpts = append(s.rcpts, ingest.Recipient{Address: to, Account: acc})
	return nil
}

// Data reads the message and stores one email per recipient. It answers 250
// only once the store has committed them.
func (s *session) Data(r io.Reader) error {
	start := time.Now()
	s.mu.Lock()
	env := ingest.Envelope{Sender: s.from, Recipients: slices.Clone(s.rcpts)}
	sizeHint := s.size
	txDone := s.txDone
	s.mu.Unlock()
	// readInTime reports, once the message is read, whether that was within
	// the data timeout: then the timer is stopped before the store is asked.
	readInTime := func() bool { return true }
	var aborted chan struct{} // closed when the timer has closed the connection
	if d := s.srv.cfg.DataTimeout; d > 0 && s.conn != nil {
		// go-smtp set a per-command deadline before DATA; the transfer
		// gets a deadline of its own. BDAT chunks each get go-smtp's
		// per-command deadline, so the timer bounds the whole message
		// whichever command carries it.
		s.conn.SetReadDeadline(start.Add(d))
		aborted = make(chan struct{})
		timer := time.AfterFunc(d, func() {
			s.conn.abort("421 4.4.2 Message transfer timed out")
			close(aborted)
		})
		defer timer.Stop()
		readInTime = func() bool {
			if timer.Stop() {
				return true
			}
			// The timer fired: let it close the connection before go-smtp
			// reads on, or the rest of the message would be read as
			// commands.
			<-aborted
			return false
		}
	}
	size, result, err := s.receive(r, env, sizeHint, aborted, txDone, readInTime)
	s.srv.cfg.Metrics.SMTPMessage(result, size, len(env.Recipients))
	attrs := []any{"session", s.id, "remote", s.remote, "from", env.Sender, "recipients", len(env.Recipients),
		"bytes", size, "result", result, "duration", time.Since(start).Round(time.Microsecond)}
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		attrs = append(attrs, "code", se.Code)
	} else {
		attrs = append(attrs, "code", 250)
	}
	s.srv.log.Info("smtp message", attrs...)
	return err
}

// receive reads and stores one message; it returns its size, the result
// for the metrics ("accepted", or why it was refused) and the reply error.
// sizeHint is the size the client announced, or 0; aborted is closed if the
// data timer closes the connection, txDone when the transaction ends.
func (s *session) receive(r io.Reader, env ingest.Envelope, sizeHint int64, aborted, txDone <-chan struct{}, readInTime func() bool) (int, string, error) {
	raw, release, err := s.srv.readMessage(r, sizeHint, aborted, txDone)
	defer release()
	if !readInTime() {
		// The timer fired: the connection is closing, nothing is stored.
		return len(raw), "timeout", &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 4, 2}, Message: "Message transfer timed out"}
	}
	if err != nil {
		var smtpErr *smtp.SMTPError
		switch {
		case errors.Is(err, smtp.ErrDataReset):
			// RSET during BDAT, or a BDAT chunk over the size limit:
			// go-smtp has answered, the connection goes on.
			return len(raw), "reset", err
		case errors.Is(err, errShuttingDown):
			// The server stops while the message waited for a
			// large-transfer slot: the sender tries again later, and
			// the rest of the message must not be read as commands.
			s.conn.abort("421 4.3.2 Service shutting down, try again later")
			return len(raw), "shutdown", errShuttingDown
		case errors.As(err, &smtpErr):
			if smtpErr.Code == 552 {
				return len(raw), "too_large", smtpErr
			}
			return len(raw), "invalid", smtpErr
		case errors.Is(err, smtp.ErrTooLongLine):
			// The rest of the message would be read as commands: the
			// connection ends here.
			s.conn.abort("500 5.5.2 Line too long")
			return len(raw), "line_too_long", &smtp.SMTPError{Code: 500, EnhancedCode: smtp.EnhancedCode{5, 5, 2}, Message: "Line too long"}
		}
		// A timeout or a broken connection in the middle of the message:
		// what is left of it must not be read as commands.
		s.conn.abort("421 4.4.2 Message transfer failed, closing connection")
		return len(raw), "connection_error", &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 4, 2}, Message: "Message transfer failed, closing connection"}
	}
	if limit := s.srv.cfg.MaxMessageBytes; limit > 0 && int64(len(raw)) > limit {
		return len(raw), "too_large", errTooLarge
	}
	ctx, cancel := context.WithTimeout(s.srv.ctx, s.srv.cfg.StoreTimeout)
	defer cancel()
	_, err = s.srv.ingest.Deliver(ctx, raw, env)
	if err != nil {
		return len(raw), strings.ReplaceAll(store.CodeOf(err).String(), " ", "_"), s.srv.reply(err, s.remote)
	}
	return len(raw), "accepted", nil
}

// DefaultMaxLargeTransfers is how many messages over largeMessage bytes the
// server reads and stores at once by default. A large message is mostly
// memory copies and a store write, so two keep both CPUs of a small machine
// busy, and 100 clients sending 25 MB each at once cost a few hundred MB
// instead of gigabytes (docs/benchmarks.md).
const DefaultMaxLargeTransfers = 2

// largeMessage is the size past which a message needs a large-transfer
// slot: every session may hold this much of a message in memory, only
// MaxLargeTransfers sessions more.
const largeMessage = 1 << 20

// readMessage reads a message from r. Past its first largeMessage bytes it
// waits for a large-transfer slot before it reads on; the caller calls
// release once the message is stored (or refused). While it waits, the
// client's data stays in the socket: TCP holds the sender back. It gives up
// waiting when aborted is closed (the data timer closed the connection:
// errAborted), when txDone is closed (RSET or the connection's end ended a
// BDAT transaction, whose Data runs beside go-smtp's command loop:
// smtp.ErrDataReset) or when the server starts draining (errShuttingDown).
func (s *Server) readMessage(r io.Reader, sizeHint int64, aborted, txDone <-chan struct{}) (raw []byte, release func(), err error) {
	release = func() {}
	first := 4 << 10
	if sizeHint > 0 && sizeHint <= largeMessage {
		first = int(sizeHint) + 1 // one more byte to see the end
	}
	raw, done, err := readInto(r, make([]byte, 0, first), largeMessage+1)
	if done || err != nil {
		return raw, release, err
	}
	s.cfg.Metrics.SMTPLargeTransfer("waiting", 1)
	select {
	case s.large <- struct{}{}:
		s.cfg.Metrics.SMTPLargeTransfer("waiting", -1)
	case <-aborted:
		s.cfg.Metrics.SMTPLargeTransfer("waiting", -1)
		return raw, release, errAborted
	case <-s.drain.stopping:
		s.cfg.Metrics.SMTPLargeTransfer("waiting", -1)
		return raw, release, errShuttingDown
	case <-txDone:
		s.cfg.Metrics.SMTPLargeTransfer("waiting", -1)
		return raw, release, smtp.ErrDataReset
	}
	s.cfg.Metrics.SMTPLargeTransfer("active", 1)
	release = func() {
		s.cfg.Metrics.SMTPLargeTransfer("active", -1)
		<-s.large
	}
	if limit := s.cfg.MaxMessageBytes; sizeHint > int64(len(raw)) && (limit <= 0 || sizeHint <= limit) {
		raw = slices.Grow(raw, int(sizeHint)+1-len(raw))
	}
	raw, _, err = readInto(r, raw, -1)
	return raw, release, err
}

// errAborted ends a message whose connection was closed while it waited.
var errAborted = errors.New("smtpd: transfer aborted")

// readInto appends what r gives to buf until r ends (done) or, when limit
// is not negative, buf holds limit bytes. It grows buf by doubling, but not
// past limit.
func readInto(r io.Reader, buf []byte, limit int) (_ []byte, done bool, err error) {
	for limit < 0 || len(buf) < limit {
		if len(buf) == cap(buf) {
			// Doubled, but not past limit: a buffer that holds
			// largeMessage+1 bytes has exactly that capacity.
			c := max(2*cap(buf), 512)
			if limit >= 0 {
				c = min(c, limit)
			}
			grown := make([]byte, len(buf), c)
			copy(grown, buf)
			buf = grown
		}
		end := cap(buf)
		if limit >= 0 {
			end = min(end, limit)
		}
		n, err := r.Read(buf[len(buf):end])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, true, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
	return buf, false, nil
}

// Reset forgets the current message.
func (s *session) Reset() {
	s.mu.Lock()
	s.from = ""
	s.rcpts = nil
	s.endTxLocked()
	s.mu.Unlock()
	s.conn.end()
}

// Logout ends the session.
func (s *session) Logout() error {
	s.mu.Lock()
	s.endTxLocked()
	s.mu.Unlock()
	return nil
}

// reply maps an ingest error to the SMTP reply; it is the one place where
// error codes become SMTP codes.
func (s *Server) reply(err error, remote string) *smtp.SMTPError {
	switch store.CodeOf(err) {
	case store.Invalid:
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 7}, Message: messageOf(err)}
	case store.TooLarge:
		return errTooLarge
	case store.Unavailable:
		s.log.Warn("smtp message deferred: store unavailable", "remote", remote, "err", err)
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Storage temporarily unavailable, try again later"}
	}
	s.log.Error("smtp message deferred: internal error", "remote", remote, "err", err)
	return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Temporary failure, try again later"}
}

func messageOf(err error) string {
	var e *store.Error
	if errors.As(err, &e) && e.Msg != "" {
		return e.Msg
	}
	return "Message refused"
}

// maxLineLength bounds one SMTP command or message line.
const maxLineLength = 1 << 20

// errTooLarge is the reply to a message over the size limit.
var errTooLarge = &smtp.SMTPError{Code: 552, EnhancedCode: smtp.EnhancedCode{5, 3, 4}, Message: "Maximum message size exceeded"}

// replyListener hands out replyConns.
type replyListener struct {
	net.Listener
	limit int64 // 0: no limit, SIZE is left alone
}

func (l *replyListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	rc := &replyConn{Conn: c}
	if l.limit > 0 {
		rc.from = []byte(fmt.Sprintf("SIZE %d\r\n", l.limit+1))
		rc.to = []byte(fmt.Sprintf("SIZE %d\r\n", l.limit))
	}
	return rc, nil
}

// replyConn holds the server's replies until it reads again (or closes),
// then writes them in one system call, and rewrites the EHLO SIZE line to
// the real limit where go-smtp shows the one-byte-larger one it is given.
//
// go-smtp flushes every reply line with its own write, and on a small VM
// each write costs about as much CPU as parsing a 2 KB message
// (docs/benchmarks.md). The server only ever waits for the client after
// reading, so a reply held until the next read reaches the client before
// the server waits for it: a multi-line reply goes out whole, and a
// pipelining client (RFC 2920) gets the replies to its whole command group
// in one write. A reply written while the server goes on working (a timer's
// 421 before the connection closes) goes out on Close.
type replyConn struct {
	net.Conn
	from, to []byte
	// mu guards pending and err: a reply may also come from a timer
	// (drainConn.abort) while go-smtp reads.
	mu      sync.Mutex
	pending []byte // replies not written yet
	err     error  // the error of the last failed write
}

func (c *replyConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if c.from != nil && len(b) > 4 && b[0] == '2' && bytes.Equal(b[4:], c.from) {
		c.pending = append(append(c.pending, b[:4]...), c.to...)
	} else {
		c.pending = append(c.pending, b...)
	}
	return len(b), nil
}

// Read writes the held replies, then reads.
func (c *replyConn) Read(b []byte) (int, error) {
	if err := c.flush(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

// Close writes the held replies, then closes.
func (c *replyConn) Close() error {
	c.flush()
	return c.Conn.Close()
}

func (c *replyConn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) > 0 && c.err == nil {
		_, c.err = c.Conn.Write(c.pending)
	}
	if cap(c.pending) > maxHeldReplies {
		c.pending = nil
	}
	c.pending = c.pending[:0]
	return c.err
}

// maxHeldReplies bounds the buffer a replyConn keeps between flushes; an
// EHLO reply or a pipelined group's replies fit many times over.
const maxHeldReplies = 16 << 10

// loginServer is the server side of the LOGIN mechanism, which go-sasl does
// not provide: it asks for a username, then a password.
type loginServer struct {
	authenticate func(password string) error
	step         int
}

func (l *loginServer) Next(response []byte) ([]byte, bool, error) {
	switch l.step {
	case 0:
		l.step = 1
		if response == nil {
			return []byte("Username:"), false, nil
		}
		fallthrough // initial response carried the username
	case 1:
		l.step = 2
		return []byte("Password:"), false, nil
	default:
		return nil, true, l.authenticate(string(response))
	}
}

// slogAdapter lets go-smtp log through slog.
type slogAdapter struct{ log *slog.Logger }

func (a slogAdapter) Printf(format string, v ...any) {
	a.log.Debug("smtp", "msg", strings.TrimSpace(fmt.Sprintf(format, v...)))
}

func (a slogAdapter) Println(v ...any) {
	a.log.Debug("smtp", "msg", strings.TrimSpace(fmt.Sprintln(v...)))
}
