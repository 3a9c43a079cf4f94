// Package imapd is mailsink's IMAP door, on github.com/emersion/go-imap/v2's
// imapserver (v2.0.0-beta.8, a pre-release pinned in go.mod). A mail
// client logs in with any user name and an API key as the password (LOGIN
// or AUTHENTICATE PLAIN); the key's account is the only mailbox, INBOX.
//
// Messages are in UID order (store.Mailboxes: the order in which they were
// stored). FETCH serves the stored raw source byte for byte, with CRLF line
// ends, through the read budget (internal/bodies); FETCH without PEEK sets
// \Seen, which is the email's read state. SEARCH maps its keys onto the
// search language (internal/search). STORE \Deleted is kept by the session;
// EXPUNGE deletes those emails. Changes made elsewhere (new mail, deletions,
// read state through the API) reach the session through the store's events:
// at the next command, or at once during IDLE. APPEND, COPY and CREATE
// answer NO [CANNOT].
package imapd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"

	"github.com/mailsink/mailsink/internal/bodies"
	"github.com/mailsink/mailsink/internal/mailaccess"
	"github.com/mailsink/mailsink/internal/metrics"
	"github.com/mailsink/mailsink/internal/search"
	"github.com/mailsink/mailsink/store"
)

// Store is what the door reads and changes.
type Store interface {
	store.Mailboxes
	GetEmail(ctx context.Context, accountID, id string) (*store.Email, error)
	UpdateEmail(ctx context.Context, accountID, id string, u store.Update) (*store.Email, error)
	DeleteEmail(ctx context.Context, accountID, id string) error
	Subscribe(accountID string) store.Subscription
}

// Search finds the ids of an account's emails that match a query
// (search.Service).
type Search interface {
	IDs(ctx context.Context, f store.ListQuery, q search.Query) ([]string, error)
}

// Config holds the door's addresses and bounds.
type Config struct {
	// Addr is the listener, with STARTTLS when TLS is set; TLSAddr, when
	// set with TLS, an implicit-TLS listener.
	Addr, TLSAddr string
	TLS           *tls.Config
	// AllowInsecureAuth accepts logins before TLS; otherwise the
	// capabilities say LOGINDISABLED there.
	AllowInsecureAuth bool
	// MaxMessages bounds a session's mailbox: the newest emails of the
	// account at SELECT; mail arriving during the session adds at most as
	// many again.
	MaxMessages int
	// StoreTimeout bounds each store call and each read of a message.
	StoreTimeout time.Duration
	// Access checks logins and bounds connections.
	Access  *mailaccess.Access
	Metrics *metrics.Doors
}

// maxIdle is how long one IDLE may last (RFC 2177 asks clients to renew
// it within 29 minutes); past it the connection is closed.
const maxIdle = 30 * time.Minute

const protocol = "imap"

// Server is a running IMAP door.
type Server struct {
	cfg    Config
	store  Store
	search Search
	reads  *bodies.Service
	log    *slog.Logger
	imap   *imapserver.Server
	ln     net.Listener
	tlsLn  net.Listener
	ctx    context.Context
	cancel context.CancelFunc
	now    func() time.Time
}

// New returns a Server; Start makes it listen.
func New(cfg Config, st Store, idx Search, reads *bodies.Service, log *slog.Logger) *Server {
	if cfg.MaxMessages <= 0 {
		cfg.MaxMessages = 1000
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = 30 * time.Second
	}
	s := &Server{cfg: cfg, store: st, search: idx, reads: reads, log: log, now: time.Now}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.imap = imapserver.New(&imapserver.Options{
		NewSession: s.newSession,
		// IMAP4rev1 with UIDPLUS (UID EXPUNGE); imapserver adds IDLE,
		// UNSELECT, ENABLE, SASL-IR, LITERAL-, STARTTLS and AUTH=PLAIN or
		// LOGINDISABLED as the connection allows.
		Caps:         imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapUIDPlus: {}},
		Logger:       logAdapter{log},
		TLSConfig:    cfg.TLS,
		InsecureAuth: cfg.AllowInsecureAuth,
	})
	return s
}

// logAdapter gives imapserver's messages (mostly clients that went away)
// to the log at debug level.
type logAdapter struct{ log *slog.Logger }

func (l logAdapter) Printf(format string, args ...any) {
	l.log.Debug("imap: " + strings.TrimSpace(fmt.Sprintf(format, args...)))
}

// Start listens on the configured addresses and serves in the background;
// a bind error is returned at once.
func (s *Server) Start() error {
	var err error
	s.ln, s.tlsLn, err = s.cfg.Access.Listen(s.cfg.Addr, s.cfg.TLSAddr, s.cfg.TLS,
		"* BYE Too many connections from your address, try again later\r\n", s.cfg.Metrics.Refusal(protocol))
	if err != nil {
		return err
	}
	if s.tlsLn != nil {
		go s.serve(s.tlsLn)
	}
	go s.serve(s.ln)
	return nil
}

func (s *Server) serve(ln net.Listener) {
	if err := s.imap.Serve(ln); err != nil && !errors.Is(err, net.ErrClosed) && s.ctx.Err() == nil {
		s.log.Error("imap listener stopped", "err", err)
	}
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

// Shutdown stops accepting and closes every connection: IMAP sessions are
// long (IDLE), and what a command under way changed in the store is done
// or not, as when a client goes away.
func (s *Server) Shutdown(ctx context.Context) error {
	s.cancel()
	err := s.imap.Close()
	if err != nil && strings.Contains(err.Error(), "closed") {
		err = nil
	}
	return err
}

// storeError answers a failed store call or read: the client may retry
// those that the store or the read budget refused for now.
func (s *Server) storeError(err error) error {
	switch {
	case store.IsCode(err, store.Busy):
		return &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeUnavailable,
			Text: "Too many large messages are being read, try again in a moment"}
	case store.IsCode(err, store.Unavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeUnavailable,
			Text: "The store is unavailable, try again later"}
	}
	s.log.Error("imap: store call failed", "err", err)
	return &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeServerBug, Text: "Internal error"}
}

var (
	errCannot = &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeCannot,
		Text: "mailsink has one mailbox, INBOX, and stores only the mail it receives"}
	errNoMailbox = &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeNonExistent,
		Text: "The only mailbox is INBOX"}
	errReadOnly = &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeCannot,
		Text: "The mailbox is read-only (EXAMINE)"}
	errExpungeIssued = &imap.Error{Type: imap.StatusResponseTypeNo, Code: "EXPUNGEISSUED",
		Text: "Some of the messages were deleted meanwhile"}
)
