// Package pop3d is mailsink's POP3 door (RFC 1939, with CAPA, RESP-CODES and
// STLS of RFC 2449, 2595 and 3206): a mail client logs in with any user name
// and an API key as the password, and its maildrop is the key's account, as
// it is at login: the newest Config.MaxMessages emails, newest first. RETR
// serves the stored raw source byte for byte, with CRLF line ends, and does
// not mark the email read; DELE then QUIT deletes it.
//
// No kept Go library serves POP3 (the ones there are are clients), and the
// protocol is a few commands on lines, so the server is written here: one
// goroutine per connection, every line read bounded in length and time.
package pop3d

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mailsink/mailsink/internal/bodies"
	"github.com/mailsink/mailsink/internal/clientaddr"
	"github.com/mailsink/mailsink/internal/mailaccess"
	"github.com/mailsink/mailsink/internal/metrics"
	"github.com/mailsink/mailsink/store"
)

// Store is what the door reads and changes: the account's list, newest
// first, for the maildrop, and the deletes of QUIT.
type Store interface {
	ListEmails(ctx context.Context, q store.ListQuery) ([]*store.Email, error)
	DeleteEmail(ctx context.Context, accountID, id string) error
}

// Config holds the door's addresses and bounds.
type Config struct {
	// Addr is the listener, with STLS when TLS is set; TLSAddr, when set
	// with TLS, an implicit-TLS listener.
	Addr, TLSAddr string
	TLS           *tls.Config
	// AllowInsecureAuth accepts USER and PASS before TLS.
	AllowInsecureAuth bool
	// MaxMessages bounds the maildrop: the newest emails of the account.
	MaxMessages int
	// StoreTimeout bounds each store call and each read of a message.
	StoreTimeout time.Duration
	// Access checks logins and bounds connections.
	Access  *mailaccess.Access
	Metrics *metrics.Doors
}

// Timeouts of a connection: waiting for a command before and after login
// (RFC 1939's autologout timer is at least ten minutes), and each write.
const (
	loginTimeout   = time.Minute
	commandTimeout = 10 * time.Minute
	writeTimeout   = time.Minute
)

// maxLine bounds a command line; RFC 2449 allows 255 octets.
const maxLine = 512

// maxErrors is how many bad commands a client may send before login: past
// it, the connection is closed (a client of another protocol, or a
// guesser).
const maxErrors = 5

const protocol = "pop3"

// Server is a running POP3 door.
type Server struct {
	cfg    Config
	store  Store
	reads  *bodies.Service
	log    *slog.Logger
	ln     net.Listener
	tlsLn  net.Listener
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	closed   bool
	sessions sync.WaitGroup
}

// New returns a Server; Start makes it listen.
func New(cfg Config, st Store, reads *bodies.Service, log *slog.Logger) *Server {
	if cfg.MaxMessages <= 0 {
		cfg.MaxMessages = 1000
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = 30 * time.Second
	}
	s := &Server{cfg: cfg, store: st, reads: reads, log: log, conns: map[net.Conn]struct{}{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// Start listens on the configured addresses and serves in the background;
// a bind error is returned at once.
func (s *Server) Start() error {
	var err error
	s.ln, s.tlsLn, err = s.cfg.Access.Listen(s.cfg.Addr, s.cfg.TLSAddr, s.cfg.TLS,
		"-ERR [SYS/TEMP] Too many connections from your address, try again later\r\n", s.cfg.Metrics.Refusal(protocol))
	if err != nil {
		return err
	}
	if s.tlsLn != nil {
		go s.serve(s.tlsLn)
	}
	go s.serve(s.ln)
	return nil
}

// Addr returns the listener's address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// TLSAddr returns the implicit-TLS listener's address, or nil.
func (s *Server) TLSAddr() net.Addr {
	if s.tlsLn == nil {
		return nil
	}
	return s.tlsLn.Addr()
}

func (s *Server) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Error("pop3 listener stopped", "err", err)
			}
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.sessions.Add(1)
		s.mu.Unlock()
		s.cfg.Metrics.Connection(protocol)
		go func() {
			defer s.sessions.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			s.handle(c)
		}()
	}
}

// Shutdown stops accepting, closes every connection (a QUIT under way
// finishes its deletes) and waits for the sessions until ctx is done.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	if s.tlsLn != nil {
		s.tlsLn.Close()
	}
	done := make(chan struct{})
	go func() {
		s.sessions.Wait()
		close(done)
	}()
	defer s.cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pop3 sessions still running: %w", ctx.Err())
	}
}

// session is one connection's state.
type session struct {
	srv    *Server
	conn   net.Conn
	r      *bufio.Reader
	w      *bufio.Writer
	remote string // client IP
	tls    bool
	user   bool // USER was given
	errors int

	account *store.Account // nil before login
	release func()
	drop    []*message
}

// message is one message of the maildrop.
type message struct {
	id      string
	size    int64 // served size; -1 until read
	deleted bool
}

func (s *Server) handle(c net.Conn) {
	ss := &session{srv: s, conn: c, remote: clientaddr.Host(c.RemoteAddr().String())}
	ss.setConn(c)
	if tc, ok := c.(*tls.Conn); ok {
		c.SetDeadline(time.Now().Add(loginTimeout))
		if err := tc.Handshake(); err != nil {
			return
		}
		ss.tls = true
	}
	defer func() {
		if ss.release != nil {
			ss.release()
		}
	}()
	ss.reply("+OK mailsink POP3 ready")
	for {
		timeout := loginTimeout
		if ss.account != nil {
			timeout = commandTimeout
		}
		c := ss.conn
		c.SetReadDeadline(time.Now().Add(timeout))
		line, err := ss.readLine()
		if errors.Is(err, errLineTooLong) {
			ss.reply("-ERR Line too long")
			return
		}
		if err != nil {
			return
		}
		if !ss.command(line) {
			return
		}
		if ss.account == nil && ss.errors >= maxErrors {
			ss.reply("-ERR Too many bad commands")
			return
		}
	}
}

// setConn reads and writes c, a write deadline before each write.
func (ss *session) setConn(c net.Conn) {
	ss.conn = c
	ss.r = bufio.NewReaderSize(c, maxLine)
	ss.w = bufio.NewWriter(deadlineWriter{c})
}

// deadlineWriter gives each write to the connection writeTimeout, so that a
// long RETR to a slow client goes on while it reads.
type deadlineWriter struct{ c net.Conn }

func (d deadlineWriter) Write(p []byte) (int, error) {
	d.c.SetWriteDeadline(time.Now().Add(writeTimeout))
	return d.c.Write(p)
}

var errLineTooLong = errors.New("line too long")

// readLine reads one command line without its line end.
func (ss *session) readLine() (string, error) {
	line, err := ss.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return "", errLineTooLong
	}
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(line), "\r\n"), nil
}

// reply writes one line and flushes; a write error ends the session at
// its next read.
func (ss *session) reply(format string, args ...any) {
	fmt.Fprintf(ss.w, format, args...)
	ss.w.WriteString("\r\n")
	ss.w.Flush()
}

// fail answers a bad command; before login it counts towards maxErrors.
func (ss *session) fail(format string, args ...any) {
	if ss.account == nil {
		ss.errors++
	}
	ss.reply("-ERR "+format, args...)
}

// command runs one command line; it reports false when the session ends.
func (ss *session) command(line string) bool {
	name, arg, _ := strings.Cut(line, " ")
	name = strings.ToUpper(name)
	if ss.account != nil {
		switch name {
		case "STAT", "LIST", "UIDL", "RETR", "TOP", "DELE", "RSET", "NOOP", "QUIT", "CAPA":
			ss.srv.cfg.Metrics.Command(protocol, name)
		}
	}
	switch name {
	case "CAPA":
		ss.capa()
	case "QUIT":
		ss.quit()
		return false
	case "USER", "PASS", "STLS":
		if ss.account != nil {
			ss.fail("Command not valid after login")
			return true
		}
		switch name {
		case "USER":
			ss.userCmd(arg)
		case "PASS":
			ss.pass(arg)
		case "STLS":
			return ss.stls()
		}
	case "STAT", "LIST", "UIDL", "RETR", "TOP", "DELE", "RSET", "NOOP":
		if ss.account == nil {
			ss.fail("Log in first")
			return true
		}
		ss.transaction(name, arg)
	default:
		ss.fail("Unknown command")
	}
	return true
}

// canLogin reports whether USER and PASS are accepted on this connection.
func (ss *session) canLogin() bool { return ss.tls || ss.srv.cfg.AllowInsecureAuth }

func (ss *session) capa() {
	lines := []string{"+OK Capability list follows", "TOP", "UIDL", "RESP-CODES", "AUTH-RESP-CODE", "PIPELINING"}
	if ss.account == nil && ss.canLogin() {
		lines = append(lines, "USER")
	}
	if ss.account == nil && !ss.tls && ss.srv.cfg.TLS != nil {
		lines = append(lines, "STLS")
	}
	lines = append(lines, "IMPLEMENTATION mailsink", ".")
	for _, l := range lines {
		ss.w.WriteString(l + "\r\n")
	}
	ss.w.Flush()
}

func (ss *session) userCmd(name string) {
	switch {
	case !ss.canLogin():
		ss.fail("[AUTH] Log in over TLS: STLS first")
	case name == "":
		ss.fail("USER needs a name (any will do)")
	default:
		ss.user = true
		ss.reply("+OK Send the API key with PASS")
	}
}

func (ss *session) pass(key string) {
	if !ss.user {
		ss.fail("USER first")
		return
	}
	ss.user = false
	doors := ss.srv.cfg.Metrics
	acc, release, err := ss.srv.cfg.Access.Login(ss.remote, key)
	switch {
	case errors.Is(err, mailaccess.ErrLimited):
		doors.Login(protocol, "limited")
		ss.fail("[SYS/TEMP] Too many failed logins from this address, try again later")
		return
	case errors.Is(err, mailaccess.ErrAccountBusy):
		doors.Login(protocol, "account_busy")
		ss.fail("[IN-USE] Too many connections to this account, try again later")
		return
	case err != nil:
		doors.Login(protocol, "wrong_key")
		ss.srv.log.Info("pop3 login failed", "remote", ss.remote)
		ss.fail("[AUTH] Wrong API key")
		return
	}
	drop, err := ss.srv.maildrop(acc.ID)
	if err != nil {
		release()
		ss.srv.log.Warn("pop3: reading the maildrop failed", "account", acc.ID, "err", err)
		ss.fail("[SYS/TEMP] The store is unavailable, try again later")
		return
	}
	doors.Login(protocol, "ok")
	ss.account, ss.release, ss.drop = acc, release, drop
	ss.reply("+OK %s", messages(len(drop)))
}

// maildrop returns the account's newest emails, newest first, at most
// MaxMessages of them.
func (s *Server) maildrop(accountID string) ([]*message, error) {
	var drop []*message
	q := store.ListQuery{AccountID: accountID}
	for len(drop) < s.cfg.MaxMessages {
		q.Limit = min(100, s.cfg.MaxMessages-len(drop))
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.StoreTimeout)
		page, err := s.store.ListEmails(ctx, q)
		cancel()
		if err != nil {
			return nil, err
		}
		for _, e := range page {
			drop = append(drop, &message{id: e.ID, size: -1})
		}
		if len(page) < q.Limit {
			break
		}
		q.Before = page[len(page)-1].ID
	}
	return drop, nil
}

// stls starts TLS; it reports false when the session ends.
func (ss *session) stls() bool {
	switch {
	case ss.srv.cfg.TLS == nil:
		ss.fail("STLS is not available: no certificate is set")
		return true
	case ss.tls:
		ss.fail("TLS is on already")
		return true
	}
	ss.reply("+OK Begin TLS negotiation")
	if ss.r.Buffered() > 0 {
		// Plaintext sent after STLS would be taken as sent over TLS.
		return false
	}
	tc := tls.Server(ss.conn, ss.srv.cfg.TLS)
	tc.SetDeadline(time.Now().Add(loginTimeout))
	if err := tc.Handshake(); err != nil {
		return false
	}
	tc.SetDeadline(time.Time{})
	ss.setConn(tc)
	ss.tls, ss.user = true, false
	return true
}

// transaction runs a command of the TRANSACTION state.
func (ss *session) transaction(name, arg string) {
	switch name {
	case "NOOP":
		ss.reply("+OK")
	case "RSET":
		for _, m := range ss.drop {
			m.deleted = false
		}
		ss.reply("+OK %s", messages(len(ss.drop)))
	case "STAT":
		var n, size int64
		for _, m := range ss.drop {
			if m.deleted {
				continue
			}
			if err := ss.size(m); err != nil {
				ss.readFailed(err)
				return
			}
			n++
			size += m.size
		}
		ss.reply("+OK %d %d", n, size)
	case "LIST", "UIDL":
		ss.listing(name, arg)
	case "DELE":
		m, n, ok := ss.message(arg)
		if ok {
			m.deleted = true
			ss.reply("+OK Message %d deleted", n)
		}
	case "RETR":
		if m, _, ok := ss.message(arg); ok {
			ss.retrieve(m, -1)
		}
	case "TOP":
		num, lines, _ := strings.Cut(arg, " ")
		k, err := strconv.Atoi(strings.TrimSpace(lines))
		if err != nil || k < 0 {
			ss.fail("TOP needs a message number and a number of lines")
			return
		}
		if m, _, ok := ss.message(num); ok {
			ss.retrieve(m, k)
		}
	}
}

// message returns the message arg numbers, or answers why there is none.
func (ss *session) message(arg string) (*message, int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(arg))
	switch {
	case err != nil:
		ss.fail("A message number is needed")
	case n < 1 || n > len(ss.drop):
		ss.fail("No such message")
	case ss.drop[n-1].deleted:
		ss.fail("Message %d is deleted", n)
	default:
		return ss.drop[n-1], n, true
	}
	return nil, 0, false
}

// listing answers LIST and UIDL, of one message or of all.
func (ss *session) listing(name, arg string) {
	item := func(n int, m *message) string {
		if name == "UIDL" {
			return fmt.Sprintf("%d %s", n, m.id)
		}
		return fmt.Sprintf("%d %d", n, m.size)
	}
	if strings.TrimSpace(arg) != "" {
		m, n, ok := ss.message(arg)
		if !ok {
			return
		}
		if name == "LIST" {
			if err := ss.size(m); err != nil {
				ss.readFailed(err)
				return
			}
		}
		ss.reply("+OK %s", item(n, m))
		return
	}
	if name == "LIST" {
		for _, m := range ss.drop {
			if !m.deleted {
				if err := ss.size(m); err != nil {
					ss.readFailed(err)
					return
				}
			}
		}
	}
	ss.w.WriteString("+OK\r\n")
	for i, m := range ss.drop {
		if !m.deleted {
			ss.w.WriteString(item(i+1, m) + "\r\n")
		}
	}
	ss.w.WriteString(".\r\n")
	ss.w.Flush()
}

// size sets m's served size, reading its raw source once.
func (ss *session) size(m *message) error {
	if m.size >= 0 {
		return nil
	}
	return ss.read(m, func(raw []byte) error {
		m.size = servedSize(raw)
		return nil
	})
}

// read opens m's raw source through the read budget and gives it to fn.
func (ss *session) read(m *message, fn func(raw []byte) error) error {
	ctx, cancel := context.WithTimeout(ss.srv.ctx, ss.srv.cfg.StoreTimeout)
	defer cancel()
	r, err := ss.srv.reads.Raw(ctx, ss.account.ID, m.id)
	if err != nil {
		return err
	}
	defer r.Close()
	return fn(r.Body.Raw)
}

// readFailed answers a read of a message that failed.
func (ss *session) readFailed(err error) {
	switch {
	case store.IsCode(err, store.NotFound):
		ss.fail("A message was deleted since login")
	case store.IsCode(err, store.Busy):
		ss.fail("[SYS/TEMP] Too many large messages are being read, try again in a moment")
	default:
		ss.srv.log.Warn("pop3: reading a message failed", "account", ss.account.ID, "err", err)
		ss.fail("[SYS/TEMP] The store is unavailable, try again later")
	}
}

// retrieve answers RETR (bodyLines < 0) and TOP.
func (ss *session) retrieve(m *message, bodyLines int) {
	err := ss.read(m, func(raw []byte) error {
		m.size = servedSize(raw)
		if bodyLines < 0 {
			fmt.Fprintf(ss.w, "+OK %d octets\r\n", m.size)
		} else {
			ss.w.WriteString("+OK\r\n")
		}
		writeMessage(ss.w, raw, bodyLines)
		return ss.w.Flush()
	})
	if err != nil && ss.w.Buffered() == 0 && !isNetError(err) {
		ss.readFailed(err)
	}
}

func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, net.ErrClosed)
}

// servedSize returns the size of raw as writeMessage serves it whole,
// before dot-stuffing: CRLF line ends, also after a last line that has
// none, since the terminating line must be a line of its own.
func servedSize(raw []byte) int64 {
	n := mailaccess.CRLFSize(raw)
	switch {
	case len(raw) == 0 || raw[len(raw)-1] == '\n':
	case raw[len(raw)-1] == '\r':
		n++ // the CR becomes the CRLF
	default:
		n += 2
	}
	return n
}

// writeMessage writes raw as a POP3 multi-line answer: CRLF line ends, a
// dot doubled where a line starts with one, the header and the blank line
// after it, and at most bodyLines lines of the body (all when bodyLines is
// negative), then the terminating line.
func writeMessage(w *bufio.Writer, raw []byte, bodyLines int) {
	inBody := false
	for len(raw) > 0 && (!inBody || bodyLines != 0) {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if inBody {
			bodyLines--
		} else if len(line) == 0 {
			inBody = true
		}
		if len(line) > 0 && line[0] == '.' {
			w.WriteByte('.')
		}
		w.Write(line)
		w.WriteString("\r\n")
	}
	w.WriteString(".\r\n")
}

// quit ends the session; in the TRANSACTION state it deletes the messages
// DELE marked first (RFC 1939's UPDATE state).
func (ss *session) quit() {
	if ss.account == nil {
		ss.reply("+OK Bye")
		return
	}
	deleted, failed := 0, 0
	for _, m := range ss.drop {
		if !m.deleted {
			continue
		}
		ctx, cancel := context.WithTimeout(ss.srv.ctx, ss.srv.cfg.StoreTimeout)
		err := ss.srv.store.DeleteEmail(ctx, ss.account.ID, m.id)
		cancel()
		switch {
		case err == nil || store.IsCode(err, store.NotFound):
			deleted++
		default:
			failed++
			ss.srv.log.Warn("pop3: deleting a message failed", "account", ss.account.ID, "err", err)
		}
	}
	if failed > 0 {
		ss.reply("-ERR [SYS/TEMP] %s deleted, %d could not be: the store is unavailable", messages(deleted), failed)
		return
	}
	ss.reply("+OK %s deleted, bye", messages(deleted))
}

// messages is "1 message" or "n messages".
func messages(n int) string {
	if n == 1 {
		return "1 message"
	}
	return fmt.Sprintf("%d messages", n)
}
