// Package config reads mailsink's settings from the environment (the names
// docs/configuration.md documents) and the accounts file, and validates them once at
// start-up. A setting that does not parse is an error naming the variable; it
// is never replaced by a default.
package config

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mailsink/mailsink/internal/clientaddr"
)

// Config is every setting of one mailsink process.
type Config struct {
	HTTP HTTP
	SMTP SMTP
	// TLS is the certificate of STARTTLS, the implicit-TLS SMTP listener
	// and the HTTPS listener.
	TLS   TLS
	Store Store
	Log   Log
	// Retention is the default retention of every account; an account of
	// the accounts file may override MaxAge and MaxEmails.
	Retention Retention
	// Quota is the default storage quota of every account; an account of
	// the accounts file may override it.
	Quota Quota
	// Webhooks bounds outbound webhooks and sets their retry schedule.
	Webhooks Webhooks
	// Reads bounds the memory that reads of stored emails hold.
	Reads Reads
	// Checks configures the checks of one email (spam score,
	// authentication, links).
	Checks Checks
	// Release bounds the releases of emails to accounts' relays.
	Release Release
	// Dashboard sets how the dashboard behaves.
	Dashboard Dashboard
	// Mailbox configures the mail-client doors, IMAP and POP3.
	Mailbox Mailbox

	// Accounts are the accounts and their keys, from AccountsFile or the
	// single default account. Load leaves it empty when neither the file nor
	// MAILSINK_API_KEY gives them: UseKeyFile then makes the default account.
	Accounts []Account
	// AccountsFile is the accounts file's path, when there is one, and
	// AccountsPollInterval how often it is checked for changes (0: never).
	AccountsFile         string
	AccountsPollInterval time.Duration
	// KeyFile is where the default account's key is kept when mailsink
	// makes it up (no accounts file and no MAILSINK_API_KEY); else empty.
	KeyFile string

	// MaxMessageBytes is the largest message accepted by SMTP, /v1/inbound
	// and create's raw.
	MaxMessageBytes int64
	// ShutdownTimeout bounds how long in-flight work may take on SIGTERM.
	ShutdownTimeout time.Duration

	// Version is the build's version, for mailsink_build_info; main sets
	// it, no variable does.
	Version string

	// TrustedProxies are the proxies whose X-Forwarded-For (HTTP) and
	// PROXY protocol header (SMTP) name the client; empty trusts none.
	TrustedProxies clientaddr.Trusted
	// MetricsPerAccount adds each account's stored emails and bytes, by
	// slug, to /metrics, which needs no key; off, nothing there names an
	// account.
	MetricsPerAccount bool

	// SNSSigningCertFile, when set, is a PEM certificate that verifies every
	// SNS message instead of the one at its SigningCertURL.
	SNSSigningCertFile string
	// SNSSigningCert is the certificate read from SNSSigningCertFile.
	SNSSigningCert *x509.Certificate
	// SNSClient fetches SNS certificates and SubscribeURLs; nil (what Load
	// gives) uses a client with a 10 s timeout. Tests set it to reach a
	// local server; only SNS's host names are ever fetched.
	SNSClient *http.Client

	// PProfAddr is where main serves
	// net/http/pprof for profiling; empty (the default) serves nothing.
	PProfAddr string
}

// Checks configures the checks of one email (package checks).
type Checks struct {
	// SpamdAddr is SpamAssassin's spamd, host:port; empty leaves the spam
	// check unconfigured.
	SpamdAddr string
	// DNSResolver is the DNS server the checks ask, host:port; empty uses
	// the system's resolver.
	DNSResolver string
}

// Reads bounds the reads of stored emails (package bodies).
type Reads struct {
	// Budget is how many bytes reads hold at once in the process; Wait is
	// how long a read waits for room in it.
	Budget int64
	Wait   time.Duration
}

// Dashboard sets how the dashboard behaves.
type Dashboard struct {
	// MarkRead is whether opening a message in the dashboard marks it
	// read.
	MarkRead bool
}

// Mailbox configures the mail-client doors (packages imapd and pop3d):
// their listeners, each unset by default, and their bounds.
type Mailbox struct {
	IMAPAddr, IMAPSAddr, POP3Addr, POP3SAddr string
	// MaxConnectionsPerAddress bounds the connections of one client
	// address, MaxConnectionsPerAccount the logged-in connections of one
	// account, IMAP and POP3 together (0: no bound).
	MaxConnectionsPerAddress int
	MaxConnectionsPerAccount int
	// MaxMessages is how many of an account's newest emails a session
	// shows.
	MaxMessages int
}

// Release bounds the releases of emails to accounts' relays (the relay
// entry of the accounts file).
type Release struct {
	// PerMinute is how many emails one account may release per minute, in
	// bursts of as many; 0 means no limit.
	PerMinute int
	// Timeout bounds connecting to a relay (TLS and AUTH included), and
	// the sending of each email.
	Timeout time.Duration
}

// HTTP configures the HTTP listener.
type HTTP struct {
	Addr string
	// TLSAddr, when set, is an HTTPS listener serving the same as Addr.
	TLSAddr string
	// MaxHeldPerAccount bounds one account's requests held open at once:
	// list requests with wait, and event streams.
	MaxHeldPerAccount int
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout bound a
	// request's headers, its whole body, its answer (event streams get a
	// deadline per write instead) and an idle keep-alive connection.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	// MaxJSONBytes bounds a PATCH body; create's body is bounded by the
	// message size instead.
	MaxJSONBytes int64
	// AuthFailuresPerMinute is how many wrong API keys one client address
	// may send per minute before it is answered 429; 0 means no limit.
	AuthFailuresPerMinute int
	// AuthLimitLoopback applies that limit to loopback clients too; by
	// default they are exempt, so a test suite on the same host that checks
	// its 401s is never throttled.
	AuthLimitLoopback bool
	// SSEHeartbeat is how often an idle event stream sends a comment;
	// SSEWriteTimeout bounds one write to an event stream.
	SSEHeartbeat    time.Duration
	SSEWriteTimeout time.Duration
	// MCPMaxSessionsPerAccount bounds the MCP sessions (/mcp) one account
	// has open; MCPSessionIdleTimeout closes a session idle that long.
	MCPMaxSessionsPerAccount int
	MCPSessionIdleTimeout    time.Duration
}

// SMTP configures the SMTP listener.
type SMTP struct {
	Addr string
	// TLSAddr, when set, is an implicit-TLS listener.
	TLSAddr string
	// RequireTLS refuses MAIL and AUTH before STARTTLS.
	RequireTLS        bool
	AllowInsecureAuth bool
	// MaxRecipients is the most RCPT commands accepted per message.
	MaxRecipients int
	// ReadTimeout and WriteTimeout bound each SMTP command and reply.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// DataTimeout bounds the whole DATA transfer of one message.
	DataTimeout time.Duration
	// MaxConnections bounds the connections open at once, in all;
	// MaxConnectionsPerAddress and MaxConnectionsPerNetwork (an IPv4 /24,
	// an IPv6 /64) bound those of one client (0: no bound).
	MaxConnections           int
	MaxConnectionsPerAddress int
	MaxConnectionsPerNetwork int
	// LimitLoopback applies the per-address and per-network limits to
	// loopback clients too; by default they meet only the totals.
	LimitLoopback bool
	// MaxLargeTransfers bounds the messages over 1 MiB read and stored at
	// once (smtpd.Config).
	MaxLargeTransfers int
	// MaxBufferedBytes bounds the memory all sessions hold for their
	// messages' first MiB (smtpd.Config.Buffers).
	MaxBufferedBytes int64
}

// TLS names the certificate: a PEM pair (CertFile and KeyFile), or host
// names for a self-signed one kept in the data directory (AutoHosts).
type TLS struct {
	CertFile, KeyFile string
	AutoHosts         []string
}

// Enabled reports whether a certificate is configured.
func (t TLS) Enabled() bool { return t.CertFile != "" || len(t.AutoHosts) > 0 }

// Store selects and configures the backend: Redis when RedisURL or
// RedisCluster is set, else the embedded store under DataDir.
type Store struct {
	// DataDir is the embedded store's directory, or MemoryDataDir.
	DataDir string
	// MemoryMaxBytes bounds the embedded store in memory.
	MemoryMaxBytes int64
	RedisURL       string
	RedisCluster   []string
	// RedisPrefix starts every Redis key, so several deployments can share
	// one Redis.
	RedisPrefix string
	// RedisAckReplicas is how many replicas must confirm a create before
	// it is acknowledged (0: none), within RedisAckTimeout.
	RedisAckReplicas int
	RedisAckTimeout  time.Duration
	// Timeout bounds one HTTP request's store calls.
	Timeout time.Duration
}

// Quota bounds what one account stores, so that one team cannot fill a
// store shared with others; 0 sets no bound.
type Quota struct {
	MaxEmails int64
	MaxBytes  int64
}

// For returns the quota of account a: its overrides, else q's values.
func (q Quota) For(a Account) Quota {
	if a.Quota.MaxEmails != nil {
		q.MaxEmails = *a.Quota.MaxEmails
	}
	if a.Quota.MaxBytes != nil {
		q.MaxBytes = *a.Quota.MaxBytes
	}
	return q
}

// Retention configures the deletion of old emails, per account, in the
// background.
type Retention struct {
	// MaxAge deletes emails received longer ago than this; 0 keeps them
	// forever.
	MaxAge time.Duration
	// MaxEmails deletes an account's oldest emails beyond this many; 0 sets
	// no limit.
	MaxEmails int64
	// Grace protects emails stored (or received) less than this long ago
	// from deletion, so a test never loses the email it is waiting for.
	Grace time.Duration
	// Interval is the time between two rounds of deletion.
	Interval time.Duration
}

// Webhooks configures outbound webhook deliveries (docs/webhooks.md).
type Webhooks struct {
	MaxPerAccount  int
	MaxURLBytes    int
	PollInterval   time.Duration
	AttemptTimeout time.Duration
	Concurrency    int
	RetryBase      time.Duration
	RetryMax       time.Duration
	RetryFor       time.Duration
}

// For returns the retention of account a: its overrides, else r's values.
func (r Retention) For(a Account) (maxAge time.Duration, maxEmails int64) {
	maxAge, maxEmails = r.MaxAge, r.MaxEmails
	if a.Retention.MaxAge != nil {
		maxAge = *a.Retention.MaxAge
	}
	if a.Retention.MaxEmails != nil {
		maxEmails = *a.Retention.MaxEmails
	}
	return maxAge, maxEmails
}

// Log configures the structured logger.
type Log struct {
	Format string // "text" or "json"
	Level  string // "debug", "info", "warn" or "error"
}

// Load reads the configuration through getenv (os.Getenv in main; a map in
// tests) and readFile (os.ReadFile in main): every setting of Settings, then
// the accounts file. Every value that does not parse is reported, each
// naming its variable. Load writes nothing; see UseKeyFile.
func Load(getenv func(string) string, readFile func(string) ([]byte, error)) (*Config, error) {
	c := &Config{}
	var errs []error
	for _, s := range settings {
		// Unset and empty are the same: compose files pass ${VAR:-}.
		v := strings.TrimSpace(getenv(s.Name))
		if v == "" {
			v = s.Default
		}
		if v == "" {
			continue
		}
		if err := s.set(c, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.Name, err))
		}
	}
	if c.Store.RedisURL != "" && len(c.Store.RedisCluster) > 0 {
		errs = append(errs, errors.New("MAILSINK_REDIS_URL and MAILSINK_REDIS_CLUSTER are both set, and mailsink uses one store: "+
			"keep MAILSINK_REDIS_URL for a single Redis, or MAILSINK_REDIS_CLUSTER for a Redis Cluster"))
	}
	errs = append(errs, c.checkTLS()...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if c.SNSSigningCertFile != "" {
		cert, err := loadCertificate(c.SNSSigningCertFile, readFile)
		if err != nil {
			return nil, fmt.Errorf("MAILSINK_SNS_SIGNING_CERT_FILE: %w", err)
		}
		c.SNSSigningCert = cert
	}
	switch {
	case c.AccountsFile != "" && c.Accounts != nil:
		// MAILSINK_API_KEY made the default account.
		return nil, errors.New("MAILSINK_API_KEY and MAILSINK_ACCOUNTS_FILE are both set, and the key would be ignored: " +
			"drop MAILSINK_API_KEY and list the key under an account's apiKeys in the accounts file, " +
			"or drop MAILSINK_ACCOUNTS_FILE to run with the single default account")
	case c.AccountsFile != "":
		accounts, err := LoadAccounts(c.AccountsFile, getenv, readFile)
		if err != nil {
			return nil, err
		}
		c.Accounts = accounts
	case c.Accounts == nil && !c.Store.InMemory():
		c.KeyFile = filepath.Join(c.Store.DataDir, "api-key")
	}
	return c, nil
}

// checkTLS reports TLS settings that do not fit together. Whether the files
// load is checked when the app starts (certs.Load), since that reads them.
func (c *Config) checkTLS() []error {
	var errs []error
	t := c.TLS
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		errs = append(errs, errors.New("MAILSINK_SMTP_TLS_CERT is set but MAILSINK_SMTP_TLS_KEY is not: set both, or neither"))
	case t.CertFile == "" && t.KeyFile != "":
		errs = append(errs, errors.New("MAILSINK_SMTP_TLS_KEY is set but MAILSINK_SMTP_TLS_CERT is not: set both, or neither"))
	case t.CertFile != "" && len(t.AutoHosts) > 0:
		errs = append(errs, errors.New("MAILSINK_SMTP_TLS_AUTO and MAILSINK_SMTP_TLS_CERT are both set: choose one certificate"))
	}
	// A door starts with its plain listener, the implicit-TLS one beside it.
	if c.Mailbox.IMAPSAddr != "" && c.Mailbox.IMAPAddr == "" {
		errs = append(errs, errors.New("MAILSINK_IMAPS_ADDR is set but MAILSINK_IMAP_ADDR is not: the IMAP door listens on both, set MAILSINK_IMAP_ADDR too"))
	}
	if c.Mailbox.POP3SAddr != "" && c.Mailbox.POP3Addr == "" {
		errs = append(errs, errors.New("MAILSINK_POP3S_ADDR is set but MAILSINK_POP3_ADDR is not: the POP3 door listens on both, set MAILSINK_POP3_ADDR too"))
	}
	if !t.Enabled() {
		if c.SMTP.TLSAddr != "" {
			errs = append(errs, errors.New("MAILSINK_SMTPS_ADDR needs a certificate: set MAILSINK_SMTP_TLS_CERT and MAILSINK_SMTP_TLS_KEY, or MAILSINK_SMTP_TLS_AUTO"))
		}
		if c.HTTP.TLSAddr != "" {
			errs = append(errs, errors.New("MAILSINK_HTTPS_ADDR needs a certificate: set MAILSINK_SMTP_TLS_CERT and MAILSINK_SMTP_TLS_KEY, or MAILSINK_SMTP_TLS_AUTO"))
		}
		if c.Mailbox.IMAPSAddr != "" {
			errs = append(errs, errors.New("MAILSINK_IMAPS_ADDR needs a certificate: set MAILSINK_SMTP_TLS_CERT and MAILSINK_SMTP_TLS_KEY, or MAILSINK_SMTP_TLS_AUTO"))
		}
		if c.Mailbox.POP3SAddr != "" {
			errs = append(errs, errors.New("MAILSINK_POP3S_ADDR needs a certificate: set MAILSINK_SMTP_TLS_CERT and MAILSINK_SMTP_TLS_KEY, or MAILSINK_SMTP_TLS_AUTO"))
		}
		if c.SMTP.RequireTLS {
			errs = append(errs, errors.New("MAILSINK_SMTP_REQUIRE_TLS needs a certificate for STARTTLS: set MAILSINK_SMTP_TLS_CERT and MAILSINK_SMTP_TLS_KEY, or MAILSINK_SMTP_TLS_AUTO"))
		}
		// IMAP and POP3 have no use without a login, and with insecure
		// logins refused there would be none without STARTTLS.
		if !c.SMTP.AllowInsecureAuth {
			doors := []struct{ name, addr string }{
				{"MAILSINK_IMAP_ADDR", c.Mailbox.IMAPAddr},
				{"MAILSINK_POP3_ADDR", c.Mailbox.POP3Addr},
			}
			for _, door := range doors {
				if door.addr != "" {
					errs = append(errs, fmt.Errorf("%s with MAILSINK_SMTP_AUTH_ALLOW_INSECURE=false needs a certificate for STARTTLS, or no login could succeed: set MAILSINK_SMTP_TLS_CERT and MAILSINK_SMTP_TLS_KEY, or MAILSINK_SMTP_TLS_AUTO", door.name))
				}
			}
		}
	}
	return errs
}

// loadCertificate reads the first certificate of a PEM file.
func loadCertificate(path string, readFile func(string) ([]byte, error)) (*x509.Certificate, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	for {
		var block *pem.Block
		if block, data = pem.Decode(data); block == nil {
			return nil, fmt.Errorf("%s holds no PEM CERTIFICATE block", path)
		}
		if block.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return cert, nil
		}
	}
}

// LoadAccounts reads and parses the accounts file at path, reading what it
// refers to through getenv and readFile; its errors name
// MAILSINK_ACCOUNTS_FILE and the path.
func LoadAccounts(path string, getenv func(string) string, readFile func(string) ([]byte, error)) ([]Account, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, fmt.Errorf("MAILSINK_ACCOUNTS_FILE: %w", err)
	}
	accounts, err := ParseAccountsWith(data, getenv, readFile)
	if err != nil {
		return nil, fmt.Errorf("MAILSINK_ACCOUNTS_FILE %s: %w", path, err)
	}
	return accounts, nil
}

// DefaultAccounts returns the single account, slug default, of a mailsink
// without an accounts file, with key.
func DefaultAccounts(key string) []Account {
	return []Account{{
		ID:         DeriveAccountID("default"),
		Slug:       "default",
		Name:       "Default",
		KeyDigests: [][32]byte{Digest(key)},
	}}
}

// UseKeyFile makes the default account with the key kept in c.KeyFile,
// generating the key and the file (mode 0600, its directory too) when there
// is none yet. It returns the key only when it generated it, so that the
// start that made it can print it once. With MAILSINK_DATA_DIR=:memory: and
// no other key, it generates a key that is kept nowhere. It does nothing
// when an accounts file or MAILSINK_API_KEY gives the keys.
func (c *Config) UseKeyFile() (generated string, err error) {
	if c.KeyFile == "" {
		if c.Accounts == nil && c.AccountsFile == "" && c.Store.InMemory() {
			generated = newKey()
			c.Accounts = DefaultAccounts(generated)
		}
		return generated, nil
	}
	key, err := os.ReadFile(c.KeyFile)
	if errors.Is(err, fs.ErrNotExist) {
		generated, err = writeKeyFile(c.KeyFile)
		key = []byte(generated)
		if errors.Is(err, fs.ErrExist) {
			// Another replica on the same directory made it first.
			key, err = os.ReadFile(c.KeyFile)
		}
	}
	if err != nil {
		return "", fmt.Errorf("MAILSINK_DATA_DIR: the default account's key is kept there, but: %w "+
			"(make the directory writable, or set MAILSINK_API_KEY or MAILSINK_ACCOUNTS_FILE)", err)
	}
	k := strings.TrimSpace(string(key))
	if k == "" {
		return "", fmt.Errorf("MAILSINK_DATA_DIR: the default account's key file %s is empty: delete it to have a new key made", c.KeyFile)
	}
	c.Accounts = DefaultAccounts(k)
	return generated, nil
}

// writeKeyFile writes a new key to path, which must not exist yet.
func writeKeyFile(path string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	key := newKey()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(key + "\n")
	if err := errors.Join(err, f.Close()); err != nil {
		os.Remove(path)
		return "", err
	}
	return key, nil
}

// MemoryDataDir is the MAILSINK_DATA_DIR that keeps the embedded store in
// memory.
const MemoryDataDir = ":memory:"

// InMemory reports whether MAILSINK_DATA_DIR asks for nothing on disk.
func (s Store) InMemory() bool { return s.DataDir == MemoryDataDir }

// UsesRedis reports whether the store is Redis rather than the embedded one.
func (s Store) UsesRedis() bool { return s.RedisURL != "" || len(s.RedisCluster) > 0 }

func newKey() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic("config: no randomness: " + err.Error())
	}
	return "msk_" + hex.EncodeToString(b)
}
