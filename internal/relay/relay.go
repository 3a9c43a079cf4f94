// Package relay releases captured emails: it sends an email's stored raw
// source, as received, to the mail server of its account's relay entry
// (the accounts file's relay:), to recipients that entry allows. It bounds
// each account's releases (a rate and a few at once), times every step,
// stops when the caller's context ends, and logs and counts each release
// without its credentials.
package relay

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"golang.org/x/time/rate"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/bodies"
	"github.com/mailsink/mailsink/internal/metrics"
	"github.com/mailsink/mailsink/store"
)

// Accounts gives an account's configuration, relay entry included, as the
// accounts in force have it (the accounts file may be reloaded).
type Accounts interface {
	Config(id string) (config.Account, bool)
}

// Reads opens an email's raw source under the read budget (package bodies).
type Reads interface {
	Raw(ctx context.Context, accountID, id string) (*bodies.Read, error)
}

// Config bounds releases.
type Config struct {
	// PerMinute is how many emails one account may release per minute, in
	// bursts of as many; 0 means no limit.
	PerMinute int
	// Timeout bounds connecting to a relay (TLS and AUTH included), and
	// the sending of each email.
	Timeout time.Duration
	// Metrics counts releases; nil counts nothing.
	Metrics *metrics.Releases
	Log     *slog.Logger
}

// maxActivePerAccount bounds the releases of one account under way at
// once, so that one account cannot hold many connections open.
const maxActivePerAccount = 4

// helloName is the name given in EHLO.
const helloName = "localhost"

// Service releases emails. It is safe for concurrent use.
type Service struct {
	cfg      Config
	accounts Accounts
	reads    Reads

	mu     sync.Mutex
	limits map[string]*rate.Limiter // by account id
	active map[string]int           // releases under way, by account id
}

// New returns a Service over the accounts in force and the read service.
func New(cfg Config, accounts Accounts, reads Reads) *Service {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, accounts: accounts, reads: reads, limits: map[string]*rate.Limiter{}, active: map[string]int{}}
}

// Reply is an upstream's reply: its code and text (the enhanced status
// code, when there is one, starts the text).
type Reply struct {
	Code int
	Text string
}

// RecipientsError lists the recipients that an account's relay does not
// allow (relay.allowedRecipients).
type RecipientsError struct {
	Refused []string
}

func (e *RecipientsError) Error() string {
	return "not allowed by the account's relay.allowedRecipients: " + strings.Join(e.Refused, ", ")
}

// LimitError is a release the account may not make now: its rate
// (MAILSINK_RELEASE_PER_MINUTE) is used up, or it has as many releases
// under way as it may. Wait is when to try again.
type LimitError struct {
	Wait time.Duration
	msg  string
}

func (e *LimitError) Error() string { return e.msg }

// UpstreamError is a release that the upstream refused (Reply is its
// reply) or that could not reach it (Reply is nil).
type UpstreamError struct {
	Reply *Reply
	Err   error
}

func (e *UpstreamError) Error() string { return e.Err.Error() }

func (e *UpstreamError) Unwrap() error { return e.Err }

// Check returns the account's relay when it may release to every address
// of to. It returns an error with code Conflict when the account has no
// relay, and one with code Invalid wrapping a *RecipientsError when the
// relay does not allow some of the addresses.
func (s *Service) Check(accountID string, to []string) (*config.AccountRelay, error) {
	acc, ok := s.accounts.Config(accountID)
	if !ok || acc.Relay == nil {
		return nil, store.Errorf(store.Conflict, "release needs a relay, and this account has none: add a relay entry to the account in MAILSINK_ACCOUNTS_FILE")
	}
	var refused []string
	for _, addr := range to {
		if !acc.Relay.Allows(addr) {
			refused = append(refused, addr)
		}
	}
	if len(refused) > 0 {
		e := &RecipientsError{Refused: refused}
		return nil, store.Wrap(store.Invalid, e, e.Error())
	}
	return acc.Relay, nil
}

// Release sends the email with id in the account to the addresses of to
// through the account's relay, and returns the upstream's reply to the
// message. Its errors are Check's; NotFound, Busy and the store's from
// reading the email; QuotaExceeded wrapping a *LimitError when the account
// may not release now; and Upstream wrapping an *UpstreamError when the
// upstream refused the message or could not be reached. Nothing is sent
// unless every recipient is accepted.
func (s *Service) Release(ctx context.Context, accountID, id string, to []string) (Reply, error) {
	relay, err := s.Check(accountID, to)
	if err != nil {
		return Reply{}, err
	}
	read, err := s.read(ctx, accountID, id)
	if err != nil {
		return Reply{}, err
	}
	defer read.Close()
	done, err := s.begin(accountID)
	if err != nil {
		s.record(accountID, id, relay, to, Reply{}, err, 0)
		return Reply{}, err
	}
	defer done()
	start := time.Now()
	sess, err := s.connect(ctx, relay)
	if err != nil {
		s.record(accountID, id, relay, to, Reply{}, err, time.Since(start))
		return Reply{}, err
	}
	defer sess.close()
	reply, err := sess.send(ctx, s.from(relay, read.Email), to, read.Body.Raw)
	s.record(accountID, id, relay, to, reply, err, time.Since(start))
	return reply, err
}

// Result is what became of one email of ReleaseEach.
type Result struct {
	ID string
	// Reply is the upstream's reply to the email, when it answered.
	Reply *Reply
	// Err is nil when the email was released; else why not (the errors of
	// Release, or the connection ending before its turn).
	Err error
}

// ReleaseEach sends the emails with ids, in order, to the addresses of to
// over one connection to the account's relay, and says what became of each.
// An email the upstream refuses does not stop the others. Its errors,
// for which nothing was sent, are Check's; QuotaExceeded wrapping a
// *LimitError when the account may release nothing now; and Upstream when
// the connection to the upstream failed. Past the account's rate, the
// remaining emails are not sent (their Err wraps a *LimitError).
func (s *Service) ReleaseEach(ctx context.Context, accountID string, ids []string, to []string) ([]Result, error) {
	relay, err := s.Check(accountID, to)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	done, err := s.begin(accountID)
	if err != nil {
		s.record(accountID, ids[0], relay, to, Reply{}, err, 0)
		return nil, err
	}
	defer done()
	start := time.Now()
	sess, err := s.connect(ctx, relay)
	if err != nil {
		s.record(accountID, ids[0], relay, to, Reply{}, err, time.Since(start))
		return nil, err
	}
	defer sess.close()
	results := make([]Result, len(ids))
	var stop error // once set, why the remaining emails are not sent
	spare := true  // begin took a turn of the rate that no email has used
	for i, id := range ids {
		results[i].ID = id
		if stop == nil && ctx.Err() != nil {
			stop = store.Wrap(store.Unavailable, ctx.Err(), "not sent: the request ended first")
		}
		if stop != nil {
			results[i].Err = stop
			s.record(accountID, id, relay, to, Reply{}, stop, 0)
			continue
		}
		if i > 0 {
			start = time.Now()
		}
		reply, used, err := s.releaseOne(ctx, sess, relay, accountID, id, to, !spare)
		spare = spare && !used
		s.record(accountID, id, relay, to, reply, err, time.Since(start))
		results[i].Err = err
		if reply.Code != 0 {
			results[i].Reply = &reply
		}
		var up *UpstreamError
		var limited *LimitError
		switch {
		case err == nil:
		case errors.As(err, &limited):
			stop = err
		case !errors.As(err, &up):
		case up.Reply == nil:
			stop = store.Wrap(store.Upstream, up.Err, "not sent: the connection to the upstream was lost before this email")
		default:
			// A refused transaction is reset for the next one.
			if err := sess.reset(ctx); err != nil {
				stop = store.Wrap(store.Upstream, err, "not sent: the connection to the upstream was lost before this email")
			}
		}
	}
	return results, nil
}

// releaseOne sends one email of ReleaseEach over sess; once the email is
// found, it takes a turn of the account's rate when take is set. used says
// whether the email was sent (or the upstream tried).
func (s *Service) releaseOne(ctx context.Context, sess *session, relay *config.AccountRelay, accountID, id string, to []string, take bool) (_ Reply, used bool, _ error) {
	read, err := s.read(ctx, accountID, id)
	if err != nil {
		return Reply{}, false, err
	}
	defer read.Close()
	if take {
		if err := s.take(accountID); err != nil {
			return Reply{}, false, err
		}
	}
	reply, err := sess.send(ctx, s.from(relay, read.Email), to, read.Body.Raw)
	return reply, true, err
}

// read opens the email's raw source, within the timeout: a release's
// every step has one.
func (s *Service) read(ctx context.Context, accountID, id string) (*bodies.Read, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	return s.reads.Raw(ctx, accountID, id)
}

// from is the envelope sender of a release: the relay's from, else the
// email's sender.
func (s *Service) from(relay *config.AccountRelay, e *store.Email) string {
	if relay.From != "" {
		return relay.From
	}
	return e.Sender
}

// limiter returns the account's rate limiter, nil for no limit.
func (s *Service) limiter(accountID string) *rate.Limiter {
	if s.cfg.PerMinute <= 0 {
		return nil
	}
	l, ok := s.limits[accountID]
	if !ok {
		l = rate.NewLimiter(rate.Limit(float64(s.cfg.PerMinute)/60), s.cfg.PerMinute)
		s.limits[accountID] = l
	}
	return l
}

// take takes one email's turn of the account's rate, or returns an error
// with code QuotaExceeded wrapping a *LimitError.
func (s *Service) take(accountID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.takeLocked(accountID)
}

func (s *Service) takeLocked(accountID string) error {
	l := s.limiter(accountID)
	if l == nil {
		return nil
	}
	r := l.Reserve()
	wait := r.Delay()
	if wait == 0 {
		return nil
	}
	r.Cancel()
	e := &LimitError{Wait: wait, msg: fmt.Sprintf("the account has released %d emails in the last minute, as many as MAILSINK_RELEASE_PER_MINUTE allows: try again in %s",
		s.cfg.PerMinute, wait.Round(time.Second)+time.Second)}
	return store.Wrap(store.QuotaExceeded, e, e.msg)
}

// begin takes one of the account's places for a release under way and one
// email's turn of its rate; done gives the place back.
func (s *Service) begin(accountID string) (done func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active[accountID] >= maxActivePerAccount {
		e := &LimitError{Wait: time.Second, msg: fmt.Sprintf("the account has %d releases under way, as many as it may: try again when one has ended", maxActivePerAccount)}
		return nil, store.Wrap(store.QuotaExceeded, e, e.msg)
	}
	if err := s.takeLocked(accountID); err != nil {
		return nil, err
	}
	s.active[accountID]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.active[accountID]--; s.active[accountID] == 0 {
			delete(s.active, accountID)
		}
	}, nil
}

// record logs one email's release and counts it. The log line names the
// upstream and the recipients, never the credentials.
func (s *Service) record(accountID, id string, relay *config.AccountRelay, to []string, reply Reply, err error, d time.Duration) {
	result := "released"
	var up *UpstreamError
	var limited *LimitError
	switch {
	case err == nil:
	case errors.As(err, &limited):
		result = "limited"
	case errors.As(err, &up) && up.Reply != nil:
		result = "refused"
	default:
		result = "failed"
	}
	s.cfg.Metrics.Release(result, d)
	acc, _ := s.accounts.Config(accountID)
	attrs := []any{"account", acc.Slug, "email", id, "upstream", relay.Addr(), "to", to, "result", result,
		"duration", d.Round(time.Millisecond)}
	if reply.Code != 0 {
		attrs = append(attrs, "reply", fmt.Sprintf("%d %s", reply.Code, reply.Text))
	}
	if err != nil {
		s.cfg.Log.Warn("release failed", append(attrs, "err", err)...)
		return
	}
	s.cfg.Log.Info("email released", attrs...)
}

// session is a connection to an upstream, past its greeting, TLS and AUTH.
type session struct {
	conn    net.Conn // the TCP connection, closed to end any step at once
	c       *smtp.Client
	addr    string
	timeout time.Duration
}

// connect dials the relay and makes the connection ready for mail: TLS
// (implicit or STARTTLS), EHLO and AUTH, within the timeout. It returns an
// error with code Upstream wrapping an *UpstreamError.
func (s *Service) connect(ctx context.Context, relay *config.AccountRelay) (*session, error) {
	sess := &session{addr: relay.Addr(), timeout: s.cfg.Timeout}
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	conn, err := d.DialContext(dctx, "tcp", sess.addr)
	cancel()
	if err != nil {
		return nil, sess.fail("connecting", err)
	}
	sess.conn = conn
	tlsConfig := &tls.Config{ServerName: relay.Host, RootCAs: relay.RootCAs, MinVersion: tls.VersionTLS12}
	stage := "the greeting"
	err = sess.within(ctx, func() error {
		switch relay.TLS {
		case config.RelayTLS:
			stage = "TLS"
			tc := tls.Client(conn, tlsConfig)
			if err := tc.Handshake(); err != nil {
				return err
			}
			sess.c = smtp.NewClient(tc)
		case config.RelayStartTLS:
			stage = "STARTTLS"
			c, err := smtp.NewClientStartTLS(conn, tlsConfig)
			if err != nil {
				return err
			}
			sess.c = c
		default:
			sess.c = smtp.NewClient(conn)
		}
		sess.c.CommandTimeout, sess.c.SubmissionTimeout = s.cfg.Timeout, s.cfg.Timeout
		// After STARTTLS, this EHLO is the first thing said over TLS.
		stage = "EHLO"
		if err := sess.c.Hello(helloName); err != nil {
			return err
		}
		if relay.Username == "" {
			return nil
		}
		stage = "AUTH"
		var auth sasl.Client
		switch {
		case sess.c.SupportsAuth("PLAIN"):
			auth = sasl.NewPlainClient("", relay.Username, relay.Password.Reveal())
		case sess.c.SupportsAuth("LOGIN"):
			auth = sasl.NewLoginClient(relay.Username, relay.Password.Reveal())
		default:
			return errors.New("it offers neither AUTH PLAIN nor AUTH LOGIN")
		}
		return sess.c.Auth(auth)
	})
	if err != nil {
		conn.Close()
		return nil, sess.fail(stage, err)
	}
	return sess, nil
}

// within runs step with the timeout, closing the connection when the
// timeout passes or ctx ends first, which ends the step.
func (sess *session) within(ctx context.Context, step func() error) error {
	ctx, cancel := context.WithTimeout(ctx, sess.timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { sess.conn.Close() })
	err := step()
	if !stop() {
		// The connection was closed under the step.
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("no answer within MAILSINK_RELEASE_TIMEOUT (%s)", sess.timeout)
		}
		return fmt.Errorf("the request ended first: %w", ctx.Err())
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// go-smtp's own deadline (CommandTimeout, SubmissionTimeout: the
		// same timeout) passed a moment before ctx's.
		return fmt.Errorf("no answer within MAILSINK_RELEASE_TIMEOUT (%s): %w", sess.timeout, err)
	}
	return err
}

// send sends one message: MAIL, a RCPT for each recipient, and the raw
// source as DATA, which go-smtp writes with CRLF line ends and dot-stuffing
// (a raw source with bare LF line ends goes with CRLF ones; every other
// byte as stored). It returns the reply to the message, or an error with
// code Upstream wrapping an *UpstreamError.
func (sess *session) send(ctx context.Context, from string, to []string, raw []byte) (Reply, error) {
	var reply Reply
	stage := "MAIL FROM"
	err := sess.within(ctx, func() error {
		if err := sess.c.Mail(from, &smtp.MailOptions{Size: int64(len(raw))}); err != nil {
			return err
		}
		for _, rcpt := range to {
			stage = "RCPT TO:<" + rcpt + ">"
			if err := sess.c.Rcpt(rcpt, nil); err != nil {
				return err
			}
		}
		stage = "DATA"
		w, err := sess.c.Data()
		if err != nil {
			return err
		}
		stage = "the message"
		if _, err := w.Write(raw); err != nil {
			return err
		}
		resp, err := w.CloseWithResponse()
		if err != nil {
			return err
		}
		reply = Reply{Code: 250, Text: resp.StatusText}
		return nil
	})
	if err != nil {
		return replyOf(err), sess.fail(stage, err)
	}
	return reply, nil
}

// reset ends a refused transaction so that the connection takes the next.
func (sess *session) reset(ctx context.Context) error {
	return sess.within(ctx, sess.c.Reset)
}

// close says QUIT, waiting a second at most for the answer, and closes the
// connection.
func (sess *session) close() {
	sess.c.CommandTimeout = time.Second
	sess.c.Quit()
	sess.conn.Close()
}

// fail turns the error of a step into one with code Upstream wrapping an
// *UpstreamError, with a message for the client: the upstream's reply
// when it refused, else what went wrong.
func (sess *session) fail(stage string, err error) error {
	reply := replyOf(err)
	up := &UpstreamError{Err: err}
	if reply.Code != 0 {
		up.Reply = &reply
		return store.Wrap(store.Upstream, up, fmt.Sprintf("the upstream %s refused %s: %d %s", sess.addr, stage, reply.Code, reply.Text))
	}
	return store.Wrap(store.Upstream, up, fmt.Sprintf("the upstream %s failed at %s: %v", sess.addr, stage, err))
}

// replyOf returns the upstream's reply that err carries, or a zero Reply.
func replyOf(err error) Reply {
	var se *smtp.SMTPError
	if !errors.As(err, &se) {
		return Reply{}
	}
	text := se.Message
	if ec := se.EnhancedCode; ec != (smtp.EnhancedCode{}) && ec != smtp.NoEnhancedCode {
		text = fmt.Sprintf("%d.%d.%d %s", ec[0], ec[1], ec[2], text)
	}
	return Reply{Code: se.Code, Text: text}
}
