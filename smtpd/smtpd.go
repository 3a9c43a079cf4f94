// Package smtpd is mailsink's SMTP listener: a go-smtp backend that routes
// each RCPT to an account (by AUTH, by domain, or the only account) and hands
// each message to ingest. Store failures answer 451 4.3.0 so senders retry.
package smtpd

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/mailsink/mailsink/internal/accounts"
	"github.com/mailsink/mailsink/internal/authlimit"
	"github.com/mailsink/mailsink/internal/clientaddr"
	"github.com/mailsink/mailsink/internal/faults"
	"github.com/mailsink/mailsink/internal/gate"
	"github.com/mailsink/mailsink/internal/ingest"
	"github.com/mailsink/mailsink/internal/metrics"
	"github.com/mailsink/mailsink/store"
)

// Config configures the SMTP server. Every field is the caller's choice
// (the config package holds the defaults); zero means "no bound" only where
// a field says so.
type Config struct {
	Addr   string
	Domain string // the name in the greeting
	// TLS, when not nil, is offered with STARTTLS on Addr and serves
	// TLSAddr; it should allow TLS 1.2 and later only.
	TLS *tls.Config
	// TLSAddr, when set (and TLS is not nil), is an implicit-TLS listener:
	// connections speak TLS from their first byte.
	TLSAddr string
	// RequireTLS refuses MAIL and AUTH outside TLS with 530 5.7.0.
	RequireTLS bool
	// TrustedProxies are the peers whose PROXY protocol header (v1 or v2)
	// names the client; every per-address budget and log line then uses
	// that client's address. Other peers' headers are bad commands.
	TrustedProxies clientaddr.Trusted
	// MaxMessageBytes is the largest message accepted; 0 means no bound.
	MaxMessageBytes   int64
	MaxRecipients     int
	AllowInsecureAuth bool
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	// StoreTimeout bounds how long one message may wait for the store.
	StoreTimeout time.Duration
	// DataTimeout bounds the whole transfer of one message; 0 means no
	// bound. ReadTimeout bounds each command, and each read of a message
	// transfer: a client idle that long in the middle of a message gets
	// 421 4.4.2 and the connection ends.
	DataTimeout time.Duration
	// Connections bounds the connections open at once.
	Connections ConnectionLimits
	// LimitLoopback applies the per-client limits (Connections' PerAddress
	// and PerNetwork, a client's share of Buffers) to loopback clients
	// too. Without it they meet only the totals: a load tool or a test
	// suite on the same host opens hundreds of connections from 127.0.0.1.
	LimitLoopback bool
	// Buffers, when not nil, is the memory all sessions together may hold
	// for the first largeMessage bytes of their messages, while they read
	// and store them; LargeGate bounds what they hold past that. A session
	// takes room in it before each buffer it reads into, counted in its
	// client address's share (IPv6: its /64; loopback clients only with
	// LimitLoopback), and gives it back once the message is stored or
	// refused. A session that finds no room waits, reading nothing, at most
	// ReadTimeout; then the message is answered 451 4.3.2.
	Buffers *gate.Budget
	// LargeGate gives turns to messages over largeMessage bytes, shared with
	// the HTTP API's large bodies: in total and per client address, a
	// bounded number are read and stored at once; the others wait before
	// reading past their first largeMessage bytes.
	LargeGate *gate.Gate
	// AuthLimiter, when not nil, counts failed AUTHs per client address (the
	// password is an API key); an address over its limit gets 454 for every
	// key that has not worked from it before.
	AuthLimiter *authlimit.Limiter
	// Metrics, when not nil, counts connections and messages.
	Metrics *metrics.Metrics
	// Faults, when not nil, injects the faults of the accounts' rules
	// (faults.go).
	Faults *faults.Injector
}

// Server is a running SMTP listener.
type Server struct {
	// serving counts the go-smtp Serve loops running; Shutdown waits for
	// them to end before go-smtp's own Shutdown waits for the connections
	// they counted, so that no connection is counted during that wait.
	serving  sync.WaitGroup
	cfg      Config
	accounts *accounts.Registry
	ingest   *ingest.Service
	log      *slog.Logger
	smtp     *smtp.Server
	ln       net.Listener
	tlsLn    net.Listener // the implicit-TLS listener, or nil
	conns    *connSet
	chunks   sync.Pool // *[]byte of chunkSize, for readChunks
	// noWait is a context that has ended: Acquire under it takes room in
	// Config.Buffers only when there is some now.
	noWait context.Context
	// ctx is cancelled when Shutdown gives up waiting, ending store calls of
	// transactions still in flight.
	ctx    context.Context
	cancel context.CancelFunc
}

// New returns a Server; Start makes it listen.
func New(cfg Config, reg *accounts.Registry, ing *ingest.Service, log *slog.Logger) *Server {
	s := &Server{cfg: cfg, accounts: reg, ingest: ing, log: log}
	s.conns = newConnSet(cfg.Connections, cfg.LimitLoopback, cfg.ReadTimeout)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	var ended context.CancelFunc
	s.noWait, ended = context.WithCancel(context.Background())
	ended()
	srv := smtp.NewServer(smtp.BackendFunc(s.newSession))
	srv.Addr = cfg.Addr
	srv.Domain = cfg.Domain
	// go-smtp v0.25.1 refuses a message of exactly MaxMessageBytes: its
	// reader fails before it reads the end-of-data line. So go-smtp gets no
	// limit (EHLO shows SIZE without a number: no fixed maximum announced,
	// RFC 1870), and Mail and readMessage enforce the real one.
	srv.MaxRecipients = cfg.MaxRecipients
	srv.AllowInsecureAuth = cfg.AllowInsecureAuth
	srv.TLSConfig = cfg.TLS
	if cfg.RequireTLS {
		// go-smtp would answer AUTH outside TLS with 523 5.7.10; Auth
		// answers 530 5.7.0 instead, as it does for MAIL.
		srv.AllowInsecureAuth = true
	}
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

// Start listens on the configured addresses and serves in the background.
// A bind error is returned at once, naming the setting of the address.
func (s *Server) Start() error {
	// No TCP keepalive on accepted connections: ReadTimeout bounds every
	// wait for a client, so a dead peer is found without it, and setting it
	// up is four setsockopt calls on every connection.
	lc := net.ListenConfig{KeepAlive: -1}
	if s.cfg.ReadTimeout <= 0 {
		lc.KeepAlive = 0 // Go's default
	}
	ln, err := lc.Listen(context.Background(), "tcp", s.cfg.Addr)
	if err != nil {
		return err
	}
	s.ln = s.newListener(ln, false)
	if s.cfg.TLSAddr != "" && s.cfg.TLS != nil {
		tln, err := lc.Listen(context.Background(), "tcp", s.cfg.TLSAddr)
		if err != nil {
			ln.Close()
			return &ListenError{Addr: s.cfg.TLSAddr, Err: err}
		}
		s.tlsLn = tls.NewListener(s.newListener(tln, true), s.cfg.TLS)
		s.serve(s.tlsLn)
	}
	s.serve(s.ln)
	return nil
}

// ListenError is Start's error when the implicit-TLS listener cannot bind
// (the main listener's error is returned as it is).
type ListenError struct {
	Addr string
	Err  error
}

func (e *ListenError) Error() string { return e.Addr + ": " + e.Err.Error() }
func (e *ListenError) Unwrap() error { return e.Err }

func (s *Server) newListener(ln net.Listener, implicitTLS bool) *listener {
	return &listener{Listener: ln, set: s.conns, refused: s.cfg.Metrics.SMTPConnectionRefused,
		trusted: s.cfg.TrustedProxies, implicitTLS: implicitTLS}
}

func (s *Server) serve(ln net.Listener) {
	s.serving.Add(1)
	go func() {
		defer s.serving.Done()
		err := s.smtp.Serve(ln)
		if err != nil && !errors.Is(err, smtp.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			s.log.Error("smtp server stopped", "err", err, "addr", ln.Addr().String())
		}
	}()
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// TLSAddr returns the address of the implicit-TLS listener, or nil when
// there is none.
func (s *Server) TLSAddr() net.Addr {
	if s.tlsLn == nil {
		return nil
	}
	return s.tlsLn.Addr()
}

// Shutdown stops accepting connections, lets transactions under way finish
// and closes idle connections (conn.go), and waits for open sessions to end
// until ctx is done; then it closes them.
func (s *Server) Shutdown(ctx context.Context) error {
	s.conns.drain()
	// Closing the listeners ends the Serve loops; once they have returned,
	// every connection they accepted is counted (go-smtp counts one before
	// it accepts the next), so go-smtp's wait for them cannot race a count.
	s.ln.Close()
	if s.tlsLn != nil {
		s.tlsLn.Close()
	}
	s.serving.Wait()
	err := s.smtp.Shutdown(ctx)
	if errors.Is(err, net.ErrClosed) {
		err = nil // go-smtp closing the listeners again
	}
	s.cancel()
	if err != nil {
		s.smtp.Close()
	}
	return err
}

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	s.cfg.Metrics.SMTPConnection()
	_, isTLS := c.TLSConnectionState()
	ss := &session{srv: s, c: c, conn: trackedConn(c.Conn()), id: newSessionID(), remote: c.Conn().RemoteAddr().String(), tls: isTLS}
	if ip, err := netip.ParseAddr(ss.remoteIP()); err != nil || s.cfg.LimitLoopback || !ip.IsLoopback() {
		ss.share = []string{clientaddr.Bucket(ss.remoteIP())}
	}
	return ss, nil
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
	srv    *Server
	c      *smtp.Conn
	conn   *conn // nil if the connection is not tracked
	id     string
	remote string // the client's address (behind a trusted proxy: the one it names)
	// share is the client's share of Config.Buffers its messages count
	// in (none: a loopback client without LimitLoopback).
	share   []string
	tls     bool           // the connection is TLS (STARTTLS made a new session)
	account *store.Account // set by a successful AUTH
	// rcptTaken holds the counted fault rules the transaction's RCPTs
	// took a match of (faults.Point.Taken); Mail starts it anew. Only
	// Rcpt uses it, and go-smtp calls Rcpt one at a time.
	rcptTaken map[string]bool
	// authMech is the mechanism of that AUTH. Its user name is not kept:
	// clients often send the API key as both user name and password.
	authMech string
	// mu guards the fields below: with BDAT, go-smtp runs Data in a
	// goroutine of its own while it goes on with commands (RSET, MAIL).
	mu    sync.Mutex
	from  string
	rcpts []ingest.Recipient
	size  int64 // the SIZE the client announced in MAIL, or 0
	// tx is cancelled when the transaction is reset or the connection
	// closes, so that a Data waiting for a large-transfer slot gives up.
	tx     context.Context
	cancel context.CancelFunc
	// bdat is the reader of the last BDAT transaction's Data (bdat.go).
	bdat *io.PipeReader
	// tr is the transaction's transcript so far (transcript.go).
	tr store.Transcript
	// rules holds the fault rules of the accounts the transaction has
	// met, by account id (faults.go); a new map for each transaction, and
	// for each AUTH.
	rules ruleSet
}

// endTxLocked ends the transaction's context; s.mu is held.
func (s *session) endTxLocked() {
	if s.cancel != nil {
		s.cancel()
		s.cancel = nil
	}
}

var _ smtp.AuthSession = (*session)(nil)

// AuthMechanisms lists PLAIN and LOGIN; the password is an API key.
func (s *session) AuthMechanisms() []string { return []string{sasl.Plain, sasl.Login} }

// Auth returns the SASL server of mech.
func (s *session) Auth(mech string) (sasl.Server, error) {
	if s.srv.cfg.RequireTLS && !s.tls {
		s.srv.cfg.Metrics.SMTPRejection("tls_required")
		return nil, errTLSRequired
	}
	switch mech {
	case sasl.Plain:
		return sasl.NewPlainServer(func(_, _, password string) error {
			return s.authenticate(sasl.Plain, password)
		}), nil
	case sasl.Login:
		return &loginServer{authenticate: func(password string) error {
			return s.authenticate(sasl.Login, password)
		}}, nil
	}
	return nil, smtp.ErrAuthUnknownMechanism
}

// authenticate checks key, the password of an AUTH with mech; the user
// name does not matter.
func (s *session) authenticate(mech, key string) error {
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
	s.mu.Lock()
	s.rules = ruleSet{}
	s.mu.Unlock()
	if reply := s.fault(faults.Point{Stage: store.FaultAuth, AccountID: acc.ID}, nil); reply != nil {
		return reply
	}
	s.account = acc
	s.authMech = mech
	return nil
}

// remoteIP is the client's IP address.
func (s *session) remoteIP() string { return clientaddr.Host(s.remote) }

// Mail starts a message. An empty or unusable reverse path is allowed: the
// From header decides the sender at DATA.
func (s *session) Mail(from string, opts *smtp.MailOptions) (err error) {
	defer func() {
		if err == nil {
			s.noteMail(from, opts)
		}
	}()
	reserveStack(false)
	if s.srv.cfg.RequireTLS && !s.tls {
		s.srv.cfg.Metrics.SMTPRejection("tls_required")
		return errTLSRequired
	}
	if !isASCII(from) {
		s.srv.cfg.Metrics.SMTPRejection("invalid_address")
		return needsSMTPUTF8("Sender", from)
	}
	if limit := s.srv.cfg.MaxMessageBytes; limit > 0 && opts != nil && opts.Size > limit {
		s.srv.cfg.Metrics.SMTPMessage("too_large", 0, 0)
		return errTooLarge
	}
	s.mu.Lock()
	s.rules = ruleSet{}
	s.mu.Unlock()
	if reply := s.fault(faults.Point{Stage: store.FaultMail, AccountID: accountID(s.onlyAccount()), Sender: from}, nil); reply != nil {
		return reply
	}
	if !s.conn.begin() {
		return errShuttingDown
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bdat != nil {
		awaitBDATGoroutine(s.bdat)
		s.bdat = nil
	}
	s.from = from
	s.rcptTaken = nil
	s.rcpts = nil
	s.size = 0
	s.endTxLocked()
	s.tx, s.cancel = context.WithCancel(s.srv.ctx)
	if opts != nil {
		s.size = opts.Size
	}
	return nil
}

// Rcpt routes one recipient to its account or refuses it.
func (s *session) Rcpt(to string, opts *smtp.RcptOptions) (err error) {
	defer func() { s.noteRcpt(to, opts, err) }()
	if refusal := recipientRefusal(to); refusal != nil {
		s.srv.cfg.Metrics.SMTPRejection("invalid_address")
		return refusal
	}
	acc := s.account
	if acc == nil {
		var ok bool
		if acc, ok = s.srv.accounts.ForRecipient(to); !ok {
			s.srv.cfg.Metrics.SMTPRejection("no_account")
			return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1},
				Message: "No account receives mail for <" + store.QuoteAddress(to) + ">: authenticate with an API key or use a domain of the accounts file"}
		}
	}
	s.mu.Lock()
	from, size := s.from, s.size
	pending, again := 0, false // the account's recipients so far, and whether to is one
	for _, r := range s.rcpts {
		if r.Account.ID == acc.ID {
			pending++
			again = again || strings.EqualFold(r.Address, to)
		}
	}
	s.mu.Unlock()
	if !again && s.srv.ingest.HasQuota(acc.ID) {
		// An account that can store no more, beside the recipients it
		// already has in this message, refuses this recipient alone: the
		// message goes on to the others.
		ctx, cancel := context.WithTimeout(s.srv.ctx, s.srv.cfg.StoreTimeout)
		err := s.srv.ingest.QuotaRoom(ctx, accountID(s.onlyAccount()), acc.ID, pending, size)
		cancel()
		if err != nil {
			s.srv.cfg.Metrics.SMTPRejection("quota")
			return s.srv.reply(err, s.remote)
		}
	}
	if s.rcptTaken == nil {
		s.rcptTaken = map[string]bool{}
	}
	if reply := s.fault(faults.Point{Stage: store.FaultRcpt, AccountID: acc.ID, Sender: from, Recipients: []string{to}, Taken: s.rcptTaken}, nil); reply != nil {
		return reply
	}
	if again {
		return nil // one email per distinct recipient
	}
	s.mu.Lock()
	s.rcpts = append(s.rcpts, ingest.Recipient{Address: to, Account: acc})
	s.mu.Unlock()
	return nil
}

// Data reads the message and stores one email per recipient. It answers 250
// only once the store has committed them. It returns as soon as its
// transaction ends (RSET or the connection's end during BDAT), so that it
// never outlives it.
func (s *session) Data(r io.Reader) error {
	start := time.Now()
	s.mu.Lock()
	env := ingest.Envelope{Sender: s.from, Recipients: slices.Clone(s.rcpts), Transcript: s.transcriptLocked(), Caller: accountID(s.onlyAccount())}
	sizeHint, tx := s.size, s.tx
	rules := maps.Clone(s.rules)
	if rules == nil {
		rules = ruleSet{}
	}
	pr, bdat := r.(*io.PipeReader)
	if bdat {
		s.bdat = pr
	}
	s.mu.Unlock()
	defer s.conn.endTransfer()
	var deadline time.Time
	if d := s.srv.cfg.DataTimeout; d > 0 {
		deadline = start.Add(d)
	}
	s.conn.startTransfer(deadline)
	if reply := s.faultAccounts(faults.Point{Stage: store.FaultData, Sender: env.Sender}, env.Recipients, rules); reply != nil {
		s.srv.cfg.Metrics.SMTPMessage("fault", 0, len(env.Recipients))
		if !bdat && reply != errFaultDisconnect {
			s.refuseData(r)
		}
		return reply
	}
	var fast *fastData
	if !bdat && s.conn != nil && s.c.Conn() == net.Conn(s.conn) { // plaintext DATA
		fast = newFastData(s.conn, r, maxLineLength)
		r = fast
	}
	raw, release, err := s.srv.readMessage(tx, deadline, r, sizeHint, s.conn, clientaddr.Bucket(s.remoteIP()), s.share)
	if fast != nil {
		fast.handBack()
	}
	if err == nil && bdat && s.conn.readFailed() {
		// go-smtp ends a BDAT chunk cut short by the client's end as if
		// it were complete: the message is truncated, and nobody gets
		// the reply.
		err = errTruncated
	}
	var result string
	if err == nil {
		if reply := s.faultAccounts(faults.Point{Stage: store.FaultMessage, Sender: env.Sender}, env.Recipients, rules); reply != nil {
			result, err = "fault", reply
		}
	}
	if result == "" {
		result, err = s.deliver(raw, env, err)
	}
	release()
	s.srv.cfg.Metrics.SMTPMessage(result, len(raw), len(env.Recipients))
	code := 250
	if se, ok := err.(*smtp.SMTPError); ok {
		code = se.Code
	}
	// The arguments of a line cost their boxing even when the level
	// drops it.
	if s.srv.log.Enabled(context.Background(), slog.LevelInfo) {
		s.srv.log.Info("smtp message", "session", s.id, "remote", s.remote, "from", env.Sender,
			"recipients", len(env.Recipients), "bytes", len(raw), "result", result, "code", code,
			"duration", time.Since(start).Round(time.Microsecond))
	}
	return err
}

// deliver stores raw, read with readErr, and returns the result for the
// metrics ("accepted", or why it was refused) and the reply.
func (s *session) deliver(raw []byte, env ingest.Envelope, readErr error) (string, error) {
	if readErr != nil {
		return s.transferFailed(readErr)
	}
	ctx, cancel := context.WithTimeout(s.srv.ctx, s.srv.cfg.StoreTimeout)
	defer cancel()
	if _, err := s.srv.ingest.Deliver(ctx, raw, env); err != nil {
		return strings.ReplaceAll(store.CodeOf(err).String(), " ", "_"), s.srv.reply(err, s.remote)
	}
	return "accepted", nil
}

// transferFailed returns the result and the reply for a message whose
// transfer failed with err. Where go-smtp would read the rest of the message
// as commands, the connection ends after the reply.
func (s *session) transferFailed(err error) (string, error) {
	var netErr net.Error
	switch {
	case err == errTooLarge:
		return "too_large", errTooLarge // go-smtp reads the rest of the message
	case err == errBusy:
		return "busy", errBusy // likewise
	case errors.Is(err, smtp.ErrDataReset):
		// RSET or the connection's end during BDAT: go-smtp answers.
		return "reset", err
	case err == errTruncated:
		return "truncated", &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 4, 2}, Message: "Message transfer failed, closing connection"}
	case err == errShuttingDown:
		s.conn.hangUp()
		return "shutdown", errShuttingDown
	case errors.Is(err, smtp.ErrTooLongLine):
		s.conn.hangUp()
		return "line_too_long", &smtp.SMTPError{Code: 500, EnhancedCode: smtp.EnhancedCode{5, 5, 2}, Message: "Line too long"}
	case errors.Is(err, errTransferTimeout), errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		s.conn.hangUp()
		return "timeout", errTransferTimeout
	}
	s.conn.hangUp()
	return "connection_error", &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 4, 2}, Message: "Message transfer failed, closing connection"}
}

// errTruncated ends a BDAT message whose last chunk was cut short.
var errTruncated = errors.New("smtpd: BDAT chunk cut short")

// largeMessage is the size past which a message needs a large-transfer
// slot: every session may hold this much of a message in memory, only
// MaxLargeTransfers sessions more. A large message is mostly memory copies
// and a store write, so two slots keep both CPUs of a small machine busy,
// and 100 clients sending 25 MB each at once cost a few hundred MB instead
// of gigabytes (docs/benchmarks.md).
const largeMessage = 1 << 20

// readMessage reads a message from r, refusing it (errTooLarge) past
// MaxMessageBytes. Its first largeMessage bytes are read into room taken in
// Config.Buffers under the share keys (readFirst), held until the caller
// calls release once the message is stored (or refused). Past them it waits
// for a large-transfer slot (for client) before it reads on. While it waits
// for either, the client's data stays in the socket: TCP holds the sender
// back. It gives up waiting when tx ends (the transaction ended:
// smtp.ErrDataReset), at deadline, the end of the transfer when not zero
// (context.DeadlineExceeded), or when the server starts draining
// (errShuttingDown); for room in Config.Buffers, also past ReadTimeout
// (errBusy). The deadline becomes a context only where a wait begins: most
// messages never wait, and a context's timer costs each of them. With a
// slot, the rest must come at gate.MinRate at least (c may be nil).
func (s *Server) readMessage(tx context.Context, deadline time.Time, r io.Reader, sizeHint int64, c *conn, client string, share []string) (raw []byte, release func(), err error) {
	space := &room{s: s, tx: tx, deadline: deadline, keys: share}
	release = space.release
	limit := math.MaxInt
	if s.cfg.MaxMessageBytes > 0 {
		limit = int(s.cfg.MaxMessageBytes) + 1 // one more byte to see the message is too large
	}
	raw, done, err := s.readFirst(space, r, sizeHint, min(limit, largeMessage+1))
	if err == nil && !done && len(raw) == limit {
		err = errTooLarge
	}
	if done || err != nil {
		return raw, release, err
	}
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		tx, cancel = context.WithDeadline(tx, deadline)
		defer cancel()
	}
	s.cfg.Metrics.SMTPLargeTransfer("waiting", 1)
	wait, stop := s.untilDraining(tx)
	defer stop()
	give, err := s.cfg.LargeGate.Acquire(wait, client)
	s.cfg.Metrics.SMTPLargeTransfer("waiting", -1)
	if err != nil {
		if s.draining() {
			return raw, release, errShuttingDown
		}
		if errors.Is(tx.Err(), context.DeadlineExceeded) {
			return raw, release, tx.Err()
		}
		return raw, release, smtp.ErrDataReset
	}
	s.cfg.Metrics.SMTPLargeTransfer("active", 1)
	release = func() {
		s.cfg.Metrics.SMTPLargeTransfer("active", -1)
		give()
		space.release()
	}
	if sizeHint > int64(len(raw)) && sizeHint < int64(limit) {
		raw = slices.Grow(raw, int(sizeHint)+1-len(raw))
	}
	if c != nil {
		r = &rateFloor{r: r, c: c, tx: tx, start: time.Now()}
	}
	raw, done, err = readInto(r, raw, limit)
	if err == nil && !done {
		err = errTooLarge
	}
	return raw, release, err
}

// rateFloor is a message's reader while it holds a large-transfer slot: it
// moves the connection's read deadline with what has been read, so that
// reading below the gate's data-rate floor (gate.Deadline) times out.
type rateFloor struct {
	r     io.Reader
	c     *conn
	tx    context.Context
	start time.Time
	n     int64
}

func (f *rateFloor) Read(b []byte) (int, error) {
	deadline := gate.Deadline(f.start, f.n)
	if d, ok := f.tx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	f.c.startTransfer(deadline)
	n, err := f.r.Read(b)
	f.n += int64(n)
	return n, err
}

// chunkSize is the size of the buffers that readChunks reads into. A
// session holds one while it waits for a message's data (with room for it
// in Config.Buffers). A message's first largeMessage bytes take about twice
// that for a moment, in chunks and joined (one and a half when one buffer
// grew by doubling), then largeMessage while the session waits for a
// large-transfer slot.
const chunkSize = 64 << 10

// readFirst reads the first limit bytes of a message at most (limit is at
// most largeMessage+1), taking room in Config.Buffers for each buffer
// before it reads into it. A message whose size the client announced (SIZE)
// is read into one buffer of that size; others into chunks (readChunks).
func (s *Server) readFirst(space *room, r io.Reader, sizeHint int64, limit int) (raw []byte, done bool, err error) {
	if sizeHint <= 0 || sizeHint >= int64(limit) {
		return s.readChunks(space, r, nil, limit)
	}
	n := int(sizeHint) + 1 // one more byte to see the end
	if err := space.take(int64(n)); err != nil {
		return nil, false, err
	}
	raw, done, err = readInto(r, make([]byte, 0, n), n)
	if done || err != nil {
		return raw, done, err
	}
	// More than announced (a client may count its message before it ends
	// lines with CRLF): the rest in chunks.
	return s.readChunks(space, r, raw, limit)
}

// readChunks reads r as readInto(r, head, limit) does, but into buffers of
// chunkSize kept for reuse (Server.chunks), and returns what it read in one
// allocation of its size. A message whose size the client did not announce
// then costs one copy, where growing one buffer by doubling zeroed and copied
// it several times over (a tenth of the CPU of a 100 KB message).
//
// It takes room in Config.Buffers for its first chunk alone (most messages
// end within it) and, if the message goes on, for all it may read up to
// limit at once. So a session waits for room holding one chunk at most:
// sessions that each held part of a first MiB and waited for room for the
// rest could fill the budget and all wait until they gave up. Once the
// message is read and joined, the room held is traded for the message's
// size when that is at most half of it.
func (s *Server) readChunks(space *room, r io.Reader, head []byte, limit int) (raw []byte, done bool, err error) {
	// Enough for the first largeMessage+1 bytes, readMessage's limit here.
	var held [largeMessage/chunkSize + 2]*[]byte
	var parts [len(held) + 1][]byte
	chunks, read := held[:0], parts[:0]
	if head != nil {
		read = append(read, head)
	}
	n, roomFor := len(head), 0 // roomFor: the chunks room was taken for
	for n < limit && !done && err == nil {
		if len(chunks) == roomFor {
			more := 1
			if len(chunks) > 0 || head != nil {
				more = (limit - n + chunkSize - 1) / chunkSize
			}
			if err = space.take(int64(more) * chunkSize); err != nil {
				break
			}
			roomFor += more
		}
		c, ok := s.chunks.Get().(*[]byte)
		if !ok {
			b := make([]byte, chunkSize)
			c = &b
		}
		chunks = append(chunks, c)
		var b []byte
		b, done, err = readInto(r, (*c)[:0], min(chunkSize, limit-n))
		read = append(read, b)
		n += len(b)
	}
	raw = bytes.Join(read, nil) // one allocation, not zeroed before it is filled
	for _, c := range chunks {
		s.chunks.Put(c)
	}
	if raw == nil {
		raw = []byte{}
	}
	space.shrink(int64(len(raw)))
	return raw, done, err
}

// readInto appends what r gives to buf until r ends (done) or buf holds
// limit bytes. It grows buf by doubling, but not past limit.
func readInto(r io.Reader, buf []byte, limit int) (_ []byte, done bool, err error) {
	for len(buf) < limit {
		if len(buf) == cap(buf) {
			// Doubled, but not past limit: a buffer that holds
			// largeMessage+1 bytes has exactly that capacity.
			grown := make([]byte, len(buf), min(max(2*cap(buf), 512), limit))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), limit)])
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
	// STARTTLS ends the session (and any transaction) without a Reset.
	s.conn.end()
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
	case store.Full:
		s.log.Warn("smtp message deferred: storage full", "remote", remote, "err", err)
		return &smtp.SMTPError{Code: 452, EnhancedCode: smtp.EnhancedCode{4, 3, 1}, Message: "Mail system storage is full, try again later"}
	case store.QuotaExceeded:
		return &smtp.SMTPError{Code: 452, EnhancedCode: smtp.EnhancedCode{4, 2, 2}, Message: messageOf(err)}
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

// errTLSRequired refuses MAIL and AUTH before STARTTLS when TLS is required
// (RFC 3207).
var errTLSRequired = &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "Must issue a STARTTLS command first"}

// errTooLarge is the reply to a message over the size limit.
var errTooLarge = &smtp.SMTPError{Code: 552, EnhancedCode: smtp.EnhancedCode{5, 3, 4}, Message: "Maximum message size exceeded"}

// loginServer is the server side of the LOGIN mechanism, which go-sasl does
// not provide: it asks for a username, which it drops, then a password.
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
