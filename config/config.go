// Package config reads mailsink's settings from the environment (the names
// the README documents) and the accounts file, and validates them once at
// start-up. A setting that does not parse is an error naming the variable; it
// is never replaced by a default.
package config

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Config is every setting of one mailsink process.
type Config struct {
	HTTP  HTTP
	SMTP  SMTP
	Store Store
	Log   Log
	// Retention is the default retention of every account; an account of
	// the accounts file may override MaxAge and MaxEmails.
	Retention Retention

	// Accounts are the accounts and their keys, from MAILSINK_ACCOUNTS_FILE or
	// the single default account.
	Accounts []Account
	// GeneratedKey is the default account's key when mailsink made one up
	// (no accounts file and no MAILSINK_API_KEY); main prints it once.
	GeneratedKey string

	// MaxMessageBytes is the largest message accepted by SMTP, /v1/inbound
	// and create's raw.
	MaxMessageBytes int64
	// ShutdownTimeout bounds how long in-flight work may take on SIGTERM.
	ShutdownTimeout time.Duration

	// Version is the build's version, for mailsink_build_info; main sets
	// it, no variable does.
	Version string

	// PProfAddr, from MAILSINK_PPROF_ADDR, is where main serves
	// net/http/pprof for profiling; empty (the default) serves nothing.
	PProfAddr string
}

// HTTP configures the HTTP listener.
type HTTP struct {
	Addr string
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
}

// SMTP configures the SMTP listener.
type SMTP struct {
	Addr              string
	AllowInsecureAuth bool
	// MaxRecipients is the most RCPT commands accepted per message.
	MaxRecipients int
	// ReadTimeout and WriteTimeout bound each SMTP command and reply.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// DataTimeout bounds the whole DATA transfer of one message.
	DataTimeout time.Duration
	// MaxConnections bounds the connections open at once.
	MaxConnections int
	// MaxLargeTransfers bounds the messages over 1 MiB read and stored at
	// once (smtpd.Config).
	MaxLargeTransfers int
}

// Store selects and configures the backend: Redis when RedisURL or
// RedisCluster is set, else the embedded store under DataDir.
type Store struct {
	DataDir      string
	RedisURL     string
	RedisCluster []string
	// RedisPrefix starts every Redis key, so several deployments can share
	// one Redis.
	RedisPrefix string
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
// tests) and readFile (os.ReadFile in main).
func Load(getenv func(string) string, readFile func(string) ([]byte, error)) (*Config, error) {
	p := parser{getenv: getenv}
	c := &Config{
		HTTP: HTTP{
			Addr:                  p.addr("MAILSINK_HTTP_ADDR", ":8025"),
			MaxHeldPerAccount:     int(p.int("MAILSINK_MAX_HELD_PER_ACCOUNT", 100, 1, 100000)),
			ReadHeaderTimeout:     p.duration("MAILSINK_HTTP_READ_HEADER_TIMEOUT", 10*time.Second),
			ReadTimeout:           p.duration("MAILSINK_HTTP_READ_TIMEOUT", 5*time.Minute),
			WriteTimeout:          p.duration("MAILSINK_HTTP_WRITE_TIMEOUT", 5*time.Minute),
			IdleTimeout:           p.duration("MAILSINK_HTTP_IDLE_TIMEOUT", 2*time.Minute),
			MaxJSONBytes:          p.int("MAILSINK_HTTP_MAX_JSON_BYTES", 1<<20, 1024, 1<<30),
			AuthFailuresPerMinute: int(p.int("MAILSINK_AUTH_FAILURES_PER_MINUTE", 60, 0, 1000000)),
			AuthLimitLoopback:     p.bool("MAILSINK_AUTH_LIMIT_LOOPBACK", false),
		},
		SMTP: SMTP{
			Addr:              p.addr("MAILSINK_SMTP_ADDR", ":1025"),
			AllowInsecureAuth: p.bool("MAILSINK_SMTP_AUTH_ALLOW_INSECURE", true),
			MaxRecipients:     int(p.int("MAILSINK_SMTP_MAX_RECIPIENTS", 100, 1, 100000)),
			ReadTimeout:       p.duration("MAILSINK_SMTP_READ_TIMEOUT", 60*time.Second),
			WriteTimeout:      p.duration("MAILSINK_SMTP_WRITE_TIMEOUT", 60*time.Second),
			DataTimeout:       p.duration("MAILSINK_SMTP_DATA_TIMEOUT", 5*time.Minute),
			MaxConnections:    int(p.int("MAILSINK_SMTP_MAX_CONNECTIONS", 1000, 1, 1000000)),
			MaxLargeTransfers: int(p.int("MAILSINK_SMTP_MAX_LARGE_TRANSFERS", 2, 1, 10000)),
		},
		Store: Store{
			DataDir:     p.str("MAILSINK_DATA_DIR", "./data"),
			RedisURL:    p.str("MAILSINK_REDIS_URL", ""),
			RedisPrefix: p.str("MAILSINK_REDIS_PREFIX", "mailsink:"),
		},
		Log: Log{
			Format: p.oneOf("MAILSINK_LOG_FORMAT", "text", "text", "json"),
			Level:  p.oneOf("MAILSINK_LOG_LEVEL", "info", "debug", "info", "warn", "error"),
		},
		Retention: Retention{
			MaxAge:    p.durationOrZero("MAILSINK_RETENTION_MAX_AGE", 168*time.Hour),
			MaxEmails: p.int("MAILSINK_RETENTION_MAX_EMAILS", 0, 0, 1<<53-1),
			Grace:     p.durationOrZero("MAILSINK_RETENTION_GRACE", 5*time.Minute),
			Interval:  p.duration("MAILSINK_RETENTION_INTERVAL", time.Minute),
		},
		MaxMessageBytes: p.int("MAILSINK_MAX_MESSAGE_BYTES", 26214400, 1, 1<<40),
		ShutdownTimeout: p.duration("MAILSINK_SHUTDOWN_TIMEOUT", 10*time.Second),
	}
	if _, ok := p.lookup("MAILSINK_PPROF_ADDR"); ok {
		c.PProfAddr = p.addr("MAILSINK_PPROF_ADDR", "")
	}
	if seeds := p.str("MAILSINK_REDIS_CLUSTER", ""); seeds != "" {
		for _, s := range strings.Split(seeds, ",") {
			s = strings.TrimSpace(s)
			if _, _, err := net.SplitHostPort(s); err != nil || s == "" {
				p.fail("MAILSINK_REDIS_CLUSTER", "%q is not host:port", s)
				continue
			}
			c.Store.RedisCluster = append(c.Store.RedisCluster, s)
		}
	}
	if c.Store.RedisURL != "" && !strings.HasPrefix(c.Store.RedisURL, "redis://") && !strings.HasPrefix(c.Store.RedisURL, "rediss://") {
		p.fail("MAILSINK_REDIS_URL", "must start with redis:// or rediss://")
	}
	if c.Retention.Interval < time.Second {
		// A shorter round would keep the store busy for nothing.
		p.fail("MAILSINK_RETENTION_INTERVAL", "%s is below the minimum of 1s", c.Retention.Interval)
	}
	if c.Store.RedisURL == "" && len(c.Store.RedisCluster) == 0 && c.Store.DataDir == "" {
		p.fail("MAILSINK_DATA_DIR", "must not be empty")
	}
	if p.err != nil {
		return nil, p.err
	}

	if path := getenv("MAILSINK_ACCOUNTS_FILE"); path != "" {
		data, err := readFile(path)
		if err != nil {
			return nil, fmt.Errorf("MAILSINK_ACCOUNTS_FILE: %w", err)
		}
		accounts, err := ParseAccounts(data)
		if err != nil {
			return nil, fmt.Errorf("MAILSINK_ACCOUNTS_FILE %s: %w", path, err)
		}
		c.Accounts = accounts
		return c, nil
	}
	key := getenv("MAILSINK_API_KEY")
	if key == "" {
		key = newKey()
		c.GeneratedKey = key
	}
	c.Accounts = []Account{{
		ID:         DeriveAccountID("default"),
		Slug:       "default",
		Name:       "Default",
		KeyDigests: [][32]byte{Digest(key)},
	}}
	return c, nil
}

// UsesRedis reports whether the store is Redis rather than the embedded one.
func (s Store) UsesRedis() bool { return s.RedisURL != "" || len(s.RedisCluster) > 0 }

// parser reads environment variables and keeps the first error.
type parser struct {
	getenv func(string) string
	err    error
}

func (p *parser) fail(name, format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...))
	}
}

func (p *parser) str(name, def string) string {
	if v, ok := p.lookup(name); ok {
		return v
	}
	return def
}

// lookup returns a variable's value, trimmed; unset and empty are the same.
func (p *parser) lookup(name string) (string, bool) {
	v := strings.TrimSpace(p.getenv(name))
	return v, v != ""
}

func (p *parser) addr(name, def string) string {
	v := p.str(name, def)
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		p.fail(name, "%q is not a listen address like :8025 or 127.0.0.1:8025", v)
		return def
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		p.fail(name, "%q has no valid port", v)
	}
	if host != "" && host != "localhost" && net.ParseIP(host) == nil {
		p.fail(name, "%q: host must be an IP address or localhost", v)
	}
	return v
}

func (p *parser) bool(name string, def bool) bool {
	v, ok := p.lookup(name)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.fail(name, "%q is not true or false", v)
		return def
	}
	return b
}

func (p *parser) int(name string, def, lo, hi int64) int64 {
	v, ok := p.lookup(name)
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		p.fail(name, "%q is not a whole number from %d to %d", v, lo, hi)
		return def
	}
	return n
}

func (p *parser) duration(name string, def time.Duration) time.Duration {
	v, ok := p.lookup(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		p.fail(name, "%q is not a positive duration like 30s", v)
		return def
	}
	return d
}

// durationOrZero is duration that also accepts 0, which turns a feature off.
func (p *parser) durationOrZero(name string, def time.Duration) time.Duration {
	v, ok := p.lookup(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		p.fail(name, "%q is not a duration like 24h or 90m, or 0", v)
		return def
	}
	return d
}

func (p *parser) oneOf(name, def string, allowed ...string) string {
	v, ok := p.lookup(name)
	if !ok {
		return def
	}
	v = strings.ToLower(v)
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	p.fail(name, "%q is not one of %s", v, strings.Join(allowed, ", "))
	return def
}

func newKey() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic("config: no randomness: " + err.Error())
	}
	return "msk_" + hex.EncodeToString(b)
}
