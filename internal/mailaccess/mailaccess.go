// Package mailaccess is what the mail-client doors (internal/imapd,
// internal/pop3d) share: the login with an API key as the password, under
// the wrong-key limit of the API and SMTP AUTH; the bounds on their
// connections, per client address and per account; and serving a stored
// message with CRLF line ends.
package mailaccess

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/mailsink/mailsink/internal/authlimit"
	"github.com/mailsink/mailsink/internal/clientaddr"
	"github.com/mailsink/mailsink/internal/held"
	"github.com/mailsink/mailsink/store"
)

// Keys finds the account of an API key (accounts.Registry).
type Keys interface {
	ByKey(key string) (*store.Account, bool)
}

// Config holds what Access checks logins against and its bounds.
type Config struct {
	Keys Keys
	// AuthLimiter counts wrong keys per client address, shared with the
	// API and SMTP AUTH; nil limits nothing.
	AuthLimiter *authlimit.Limiter
	// PerAddress bounds the connections open at once from one client
	// address (an IPv6 /64), IMAP and POP3 together; PerAccount the
	// logged-in connections of one account. 0 means no bound.
	PerAddress, PerAccount int
}

// Access checks logins and bounds connections. It is safe for concurrent
// use.
type Access struct {
	cfg       Config
	byAddress *held.Limiter // nil without a bound
	byAccount *held.Limiter
}

// New returns an Access of cfg.
func New(cfg Config) *Access {
	a := &Access{cfg: cfg}
	if cfg.PerAddress > 0 {
		a.byAddress = held.NewLimiter(cfg.PerAddress)
	}
	if cfg.PerAccount > 0 {
		a.byAccount = held.NewLimiter(cfg.PerAccount)
	}
	return a
}

// The errors of Login; each door answers them in its protocol.
var (
	// ErrWrongKey: the password is no account's API key.
	ErrWrongKey = errors.New("wrong API key")
	// ErrLimited: the address sent too many wrong keys; it is refused,
	// whatever the key, until its window ends.
	ErrLimited = errors.New("too many failed logins from this address")
	// ErrAccountBusy: the account has as many connections as it may.
	ErrAccountBusy = errors.New("too many connections to this account")
)

// Login returns the account whose API key is key, tried from the client
// address addr (an IP address), and a place among the account's
// connections, which release gives back (once, when the session ends). The
// user name of a login is not asked for: any will do.
func (a *Access) Login(addr, key string) (*store.Account, func(), error) {
	acc, ok := a.cfg.Keys.ByKey(key)
	if allowed, _ := a.cfg.AuthLimiter.Attempt(addr, key, ok); !allowed {
		return nil, nil, ErrLimited
	}
	if !ok {
		return nil, nil, ErrWrongKey
	}
	if a.byAccount == nil {
		return acc, func() {}, nil
	}
	release, ok := a.byAccount.Acquire(acc.ID)
	if !ok {
		return nil, nil, ErrAccountBusy
	}
	return acc, release, nil
}

// Listener returns ln bounded per client address: a connection from an
// address that has PerAddress open already gets refusal (a line of the
// door's protocol, or nothing when empty: over implicit TLS a plaintext
// line would be garbage) and is closed, and refused is called (when not
// nil); Accept goes on to the next one.
func (a *Access) Listener(ln net.Listener, refusal string, refused func()) net.Listener {
	if a.byAddress == nil {
		return ln
	}
	return &listener{Listener: ln, limit: a.byAddress, refusal: refusal, refused: refused}
}

// Listen opens a door's listeners, bounded per client address: the plain
// one on addr (refusal is its protocol's line for a client over its
// bound), and when tlsAddr and tlsConfig are set the implicit-TLS one on
// tlsAddr. A bind error of the TLS listener is a *ListenError.
func (a *Access) Listen(addr, tlsAddr string, tlsConfig *tls.Config, refusal string, refused func()) (plain, secure net.Listener, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	plain = a.Listener(ln, refusal, refused)
	if tlsAddr == "" || tlsConfig == nil {
		return plain, nil, nil
	}
	tln, err := net.Listen("tcp", tlsAddr)
	if err != nil {
		ln.Close()
		return nil, nil, &ListenError{Addr: tlsAddr, Err: err}
	}
	return plain, tls.NewListener(a.Listener(tln, "", refused), tlsConfig), nil
}

// ListenError is Listen's error when the implicit-TLS listener cannot bind.
type ListenError struct {
	Addr string
	Err  error
}

func (e *ListenError) Error() string { return e.Addr + ": " + e.Err.Error() }
func (e *ListenError) Unwrap() error { return e.Err }

type listener struct {
	net.Listener
	limit   *held.Limiter
	refusal string
	refused func()
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		release, ok := l.limit.Acquire(clientaddr.Bucket(clientaddr.Host(c.RemoteAddr().String())))
		if ok {
			return &conn{Conn: c, release: release}, nil
		}
		if l.refused != nil {
			l.refused()
		}
		go refuse(c, l.refusal)
	}
}

// refuseWait bounds the write of a refusal to a client that does not read.
const refuseWait = 5 * time.Second

func refuse(c net.Conn, line string) {
	if line != "" {
		c.SetWriteDeadline(time.Now().Add(refuseWait))
		c.Write([]byte(line))
	}
	c.Close()
}

// conn gives its address's place back when closed.
type conn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *conn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// CRLF returns raw with every line feed not preceded by a carriage return
// made CRLF: what the doors serve of a stored message, whose raw source may
// end lines with LF alone (mail given through the API). It returns raw
// itself when every line ends with CRLF already.
func CRLF(raw []byte) []byte {
	n := bareLFs(raw)
	if n == 0 {
		return raw
	}
	out := make([]byte, 0, len(raw)+n)
	for {
		i := bytes.IndexByte(raw, '\n')
		if i < 0 {
			return append(out, raw...)
		}
		if i > 0 && raw[i-1] == '\r' {
			out = append(out, raw[:i+1]...)
		} else {
			out = append(out, raw[:i]...)
			out = append(out, '\r', '\n')
		}
		raw = raw[i+1:]
	}
}

// CRLFSize returns len(CRLF(raw)) without making it.
func CRLFSize(raw []byte) int64 { return int64(len(raw) + bareLFs(raw)) }

func bareLFs(raw []byte) int {
	n := 0
	for i, c := range raw {
		if c == '\n' && (i == 0 || raw[i-1] != '\r') {
			n++
		}
	}
	return n
}
