package config

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mailsink/mailsink/internal/clientaddr"
)

// A Setting is one environment variable: its name, its default (as a user
// would write it; empty means unset), what it means, and how its value is
// parsed into a Config. The table below is the one home of every setting:
// Load parses it, `mailsink --help` prints it and the table of
// docs/configuration.md is generated from it (a test compares the two).
type Setting struct {
	Name    string
	Default string
	// Help says what the setting means, in Markdown (code in backquotes).
	Help string
	set  func(c *Config, v string) error
}

// Settings returns every setting, in the order of the docs' table.
func Settings() []Setting { return append([]Setting(nil), settings...) }

// Value returns the value Load would use for the setting name: its
// variable's value, else its default.
func Value(getenv func(string) string, name string) string {
	if v := strings.TrimSpace(getenv(name)); v != "" {
		return v
	}
	for _, s := range settings {
		if s.Name == name {
			return s.Default
		}
	}
	return ""
}

var settings = []Setting{
	{"MAILSINK_HTTP_ADDR", ":8025", "HTTP listener: dashboard (`/`), API, `/healthz`, `/readyz`, `/metrics`",
		addr(func(c *Config) *string { return &c.HTTP.Addr })},
	{"MAILSINK_SMTP_ADDR", ":1025", "SMTP listener",
		addr(func(c *Config) *string { return &c.SMTP.Addr })},
	{"MAILSINK_DATA_DIR", "./data", "directory of the embedded store (`store/`, used when no Redis is set; a previous release's `mailsink.db` there is migrated into it at the first start), of the generated API key (`api-key`) and of the `MAILSINK_SMTP_TLS_AUTO` certificate; created when missing. `:memory:` keeps the store in memory and writes nothing to disk: nothing survives a restart, the generated key is only printed and the certificate is made anew at each start",
		text(func(c *Config) *string { return &c.Store.DataDir })},
	{"MAILSINK_MEMORY_MAX_BYTES", "1073741824", "with `MAILSINK_DATA_DIR=:memory:`, the most bytes the store may hold in memory; past it, SMTP answers `452 4.3.1` and the API `507`, as on a full disk, until deletes or retention make room",
		integer(16<<20, 1<<44, func(c *Config) *int64 { return &c.Store.MemoryMaxBytes })},
	{"MAILSINK_REDIS_URL", "", "`redis://[user:pass@]host:port/db` (or `rediss://`): use Redis as the store",
		redisURL},
	{"MAILSINK_REDIS_CLUSTER", "", "comma-separated `host:port` seeds of a Redis Cluster: use it as the store",
		redisCluster},
	{"MAILSINK_REDIS_PREFIX", "mailsink:", "prefix of every Redis key, so deployments can share a Redis",
		text(func(c *Config) *string { return &c.Store.RedisPrefix })},
	{"MAILSINK_REDIS_ACK_REPLICAS", "0", "before answering `250`/`201`, wait until this many replicas of the account's Redis master have the write (`WAIT`); `0` does not wait, so a failover may lose acknowledged mail (see [Redis](redis.md))",
		integer(0, 100, func(c *Config) *int { return &c.Store.RedisAckReplicas })},
	{"MAILSINK_REDIS_ACK_TIMEOUT", "1s", "how long to wait for those replicas; past it the message is answered `451` (API: `503`) and stores nothing, even if the write lands later (keep it under the Redis client's 3s read timeout)",
		duration(time.Millisecond, func(c *Config) *time.Duration { return &c.Store.RedisAckTimeout })},
	{"MAILSINK_STORE_TIMEOUT", "30s", "how long one HTTP request or SMTP message may wait for the store before it is answered `503` (SMTP `451`)",
		duration(positive, func(c *Config) *time.Duration { return &c.Store.Timeout })},
	{"MAILSINK_ACCOUNTS_FILE", "", "accounts and keys (below); reloaded on `SIGHUP` and when its content changes",
		text(func(c *Config) *string { return &c.AccountsFile })},
	{"MAILSINK_ACCOUNTS_POLL_INTERVAL", "5s", "how often the accounts file is checked for changes; `0`: only on `SIGHUP`",
		duration(0, func(c *Config) *time.Duration { return &c.AccountsPollInterval })},
	{"MAILSINK_API_KEY", "", "without an accounts file: the key of the single `default` account (else one is generated and kept in `MAILSINK_DATA_DIR/api-key`)",
		apiKey},
	{"MAILSINK_SMTP_TLS_CERT", "", "PEM certificate file (with `MAILSINK_SMTP_TLS_KEY`): EHLO offers `STARTTLS` with it, and `MAILSINK_SMTPS_ADDR` and `MAILSINK_HTTPS_ADDR` present it; a renewed pair is picked up without a restart",
		text(func(c *Config) *string { return &c.TLS.CertFile })},
	{"MAILSINK_SMTP_TLS_KEY", "", "PEM private key file of `MAILSINK_SMTP_TLS_CERT`",
		text(func(c *Config) *string { return &c.TLS.KeyFile })},
	{"MAILSINK_SMTP_TLS_AUTO", "", "comma-separated host names: a self-signed certificate for them (and `localhost`, `127.0.0.1`, `::1`) is made once, kept in `MAILSINK_DATA_DIR` (`tls-cert.pem`, `tls-key.pem`), and used as `MAILSINK_SMTP_TLS_CERT` would be; clients can download it from `GET /tls/certificate.pem`",
		tlsAuto},
	{"MAILSINK_SMTPS_ADDR", "", "an implicit-TLS SMTP listener (the port 465 style); needs a certificate (one of the two above)",
		addr(func(c *Config) *string { return &c.SMTP.TLSAddr })},
	{"MAILSINK_SMTP_REQUIRE_TLS", "false", "`MAIL` and `AUTH` before `STARTTLS` get `530 5.7.0` (connections to `MAILSINK_SMTPS_ADDR` are TLS from the start)",
		boolean(func(c *Config) *bool { return &c.SMTP.RequireTLS })},
	{"MAILSINK_HTTPS_ADDR", "", "an HTTPS listener serving what the HTTP listener serves, with the SMTP certificate",
		addr(func(c *Config) *string { return &c.HTTP.TLSAddr })},
	{"MAILSINK_IMAP_ADDR", "", "an IMAP listener for mail clients ([Mail clients](mail-clients.md)): any user name and an API key as the password, the key's account as `INBOX`; `STARTTLS` with the SMTP certificate; logins before TLS only as `MAILSINK_SMTP_AUTH_ALLOW_INSECURE` and `MAILSINK_SMTP_REQUIRE_TLS` allow (when they allow none, a certificate is needed)",
		addr(func(c *Config) *string { return &c.Mailbox.IMAPAddr })},
	{"MAILSINK_IMAPS_ADDR", "", "an implicit-TLS IMAP listener (the port 993 style) beside `MAILSINK_IMAP_ADDR`; needs a certificate",
		addr(func(c *Config) *string { return &c.Mailbox.IMAPSAddr })},
	{"MAILSINK_POP3_ADDR", "", "a POP3 listener for mail clients, logins as IMAP's; `STLS` with the SMTP certificate",
		addr(func(c *Config) *string { return &c.Mailbox.POP3Addr })},
	{"MAILSINK_POP3S_ADDR", "", "an implicit-TLS POP3 listener (the port 995 style) beside `MAILSINK_POP3_ADDR`; needs a certificate",
		addr(func(c *Config) *string { return &c.Mailbox.POP3SAddr })},
	{"MAILSINK_MAILBOX_MAX_CONNECTIONS_PER_ADDRESS", "50", "IMAP and POP3 connections open at once from one client address (IPv6: /64), loopback included; more are refused (`* BYE`, `-ERR`); `0`: no bound",
		integer(0, 1_000_000, func(c *Config) *int { return &c.Mailbox.MaxConnectionsPerAddress })},
	{"MAILSINK_MAILBOX_MAX_CONNECTIONS_PER_ACCOUNT", "20", "IMAP and POP3 connections logged in at once to one account, `IDLE` included; a login past it gets `NO [LIMIT]` (POP3 `-ERR [IN-USE]`); `0`: no bound",
		integer(0, 1_000_000, func(c *Config) *int { return &c.Mailbox.MaxConnectionsPerAccount })},
	{"MAILSINK_MAILBOX_MAX_MESSAGES", "1000", "the newest emails an IMAP `INBOX` shows at `SELECT` (mail arriving during the session adds as many again) and a POP3 maildrop holds",
		integer(1, 1_000_000, func(c *Config) *int { return &c.Mailbox.MaxMessages })},
	{"MAILSINK_SMTP_AUTH_ALLOW_INSECURE", "true", "accept SMTP AUTH without TLS (AUTH over TLS is always accepted); likewise IMAP and POP3 logins",
		boolean(func(c *Config) *bool { return &c.SMTP.AllowInsecureAuth })},
	{"MAILSINK_MAX_MESSAGE_BYTES", "26214400", "largest message accepted by SMTP (`SIZE`), `/v1/inbound` and create's `raw`",
		integer(1, 1<<40, func(c *Config) *int64 { return &c.MaxMessageBytes })},
	{"MAILSINK_SMTP_MAX_RECIPIENTS", "100", "RCPTs accepted per message (more get `452`); also the most recipients of one `/v1/inbound` message (more: `400`, nothing stored)",
		integer(1, 100000, func(c *Config) *int { return &c.SMTP.MaxRecipients })},
	{"MAILSINK_SMTP_READ_TIMEOUT", "60s", "reading one SMTP command, and each read of a message's transfer (DATA, BDAT): a client idle that long in the middle of a message gets `421 4.4.2` and the connection closes",
		duration(positive, func(c *Config) *time.Duration { return &c.SMTP.ReadTimeout })},
	{"MAILSINK_SMTP_WRITE_TIMEOUT", "60s", "writing one SMTP reply",
		duration(positive, func(c *Config) *time.Duration { return &c.SMTP.WriteTimeout })},
	{"MAILSINK_SMTP_DATA_TIMEOUT", "5m", "the whole transfer of one message (DATA, or all its BDAT chunks), however steadily it comes",
		duration(positive, func(c *Config) *time.Duration { return &c.SMTP.DataTimeout })},
	{"MAILSINK_SMTP_MAX_CONNECTIONS", "1000", "SMTP connections open at once in all (more are answered `421 4.7.0`)",
		integer(1, 1000000, func(c *Config) *int { return &c.SMTP.MaxConnections })},
	{"MAILSINK_SMTP_MAX_CONNECTIONS_PER_ADDRESS", "100", "SMTP connections open at once from one client address (the one `MAILSINK_TRUSTED_PROXIES` name, behind them), so that a few clients cannot take them all; more are answered `421 4.7.0`; `0`: no bound",
		integer(0, 1000000, func(c *Config) *int { return &c.SMTP.MaxConnectionsPerAddress })},
	{"MAILSINK_SMTP_MAX_CONNECTIONS_PER_NETWORK", "250", "likewise from one network: an IPv4 /24, an IPv6 /64",
		integer(0, 1000000, func(c *Config) *int { return &c.SMTP.MaxConnectionsPerNetwork })},
	{"MAILSINK_SMTP_LIMIT_LOOPBACK", "false", "apply the per-address and per-network SMTP limits to loopback clients too; by default a load tool or test suite on the same host (hundreds of connections from 127.0.0.1) meets only the totals",
		boolean(func(c *Config) *bool { return &c.SMTP.LimitLoopback })},
	{"MAILSINK_SMTP_MAX_BUFFERED_BYTES", "67108864", "memory all SMTP sessions together may hold of their messages' first MiB while they read and store them, at most an eighth of it for one client address (IPv6: /64; loopback clients meet only the total, unless `MAILSINK_SMTP_LIMIT_LOOPBACK`); a session that finds no room waits, its data unread, up to `MAILSINK_SMTP_READ_TIMEOUT`, then gets `451 4.3.2`; past the first MiB, `MAILSINK_SMTP_MAX_LARGE_TRANSFERS` bounds memory (at least 16 MiB)",
		integer(16<<20, 1<<40, func(c *Config) *int64 { return &c.SMTP.MaxBufferedBytes })},
	{"MAILSINK_SMTP_MAX_LARGE_TRANSFERS", "2", "messages (SMTP) and request bodies (HTTP) over 1 MiB read and stored at once, both together, at most half of them (at least one) from one client address; the others wait, unread, after their first MiB (so memory does not grow with the number of senders of large mail); an HTTP request waits at most a minute (then `429` with `Retry-After`), and an SMTP message holding a turn must average 256 KiB/s after its first 5 s (else `421 4.4.2`)",
		integer(1, 10000, func(c *Config) *int { return &c.SMTP.MaxLargeTransfers })},
	{"MAILSINK_HTTP_READ_HEADER_TIMEOUT", "10s", "reading a request's headers",
		duration(positive, func(c *Config) *time.Duration { return &c.HTTP.ReadHeaderTimeout })},
	{"MAILSINK_HTTP_READ_TIMEOUT", "5m", "reading a whole request",
		duration(positive, func(c *Config) *time.Duration { return &c.HTTP.ReadTimeout })},
	{"MAILSINK_HTTP_WRITE_TIMEOUT", "5m", "writing a whole answer (event streams use `MAILSINK_SSE_WRITE_TIMEOUT` per write instead)",
		duration(positive, func(c *Config) *time.Duration { return &c.HTTP.WriteTimeout })},
	{"MAILSINK_HTTP_IDLE_TIMEOUT", "2m", "an idle keep-alive connection",
		duration(positive, func(c *Config) *time.Duration { return &c.HTTP.IdleTimeout })},
	{"MAILSINK_HTTP_MAX_JSON_BYTES", "1048576", "a `PATCH` body (create is bounded by the message size; JSON nesting by 32 levels)",
		integer(1024, 1<<30, func(c *Config) *int64 { return &c.HTTP.MaxJSONBytes })},
	{"MAILSINK_SSE_HEARTBEAT", "15s", "how often an idle event stream (`/v1/events`) sends a comment, so proxies keep it open",
		duration(time.Second, func(c *Config) *time.Duration { return &c.HTTP.SSEHeartbeat })},
	{"MAILSINK_SSE_WRITE_TIMEOUT", "30s", "writing one event to an event stream; a client slower than this is disconnected",
		duration(positive, func(c *Config) *time.Duration { return &c.HTTP.SSEWriteTimeout })},
	{"MAILSINK_READ_BUDGET_BYTES", "268435456", "memory that reads of stored emails hold at once in the whole process: three quarters for the reads people wait for, at most half of those for one account, and a quarter for search's reading of new mail in the background; raw sources loaded, parses, and answers built in memory (an estimate: 7 times the raw size for a first read, 2 times once its parse is cached); a read that finds no room waits up to `MAILSINK_READ_WAIT`, then is answered `503` with `Retry-After`",
		integer(1<<20, 1<<40, func(c *Config) *int64 { return &c.Reads.Budget })},
	{"MAILSINK_READ_WAIT", "5s", "how long a read of a stored email waits for room in `MAILSINK_READ_BUDGET_BYTES`",
		duration(positive, func(c *Config) *time.Duration { return &c.Reads.Wait })},
	{"MAILSINK_MAX_HELD_PER_ACCOUNT", "100", "list requests with `wait`, event streams and the waits of MCP tools open at once per account (more get `429`, or a tool error)",
		integer(1, 100000, func(c *Config) *int { return &c.HTTP.MaxHeldPerAccount })},
	{"MAILSINK_MCP_MAX_SESSIONS_PER_ACCOUNT", "20", "MCP sessions (`/mcp`, docs/agents.md) open at once per account; a new one past it gets `429` (the held waits of MCP tools count in `MAILSINK_MAX_HELD_PER_ACCOUNT`)",
		integer(1, 100000, func(c *Config) *int { return &c.HTTP.MCPMaxSessionsPerAccount })},
	{"MAILSINK_MCP_SESSION_IDLE_TIMEOUT", "30m", "an MCP session that gets no request for this long is closed; a request with its id then gets `404`, and the client starts a new session",
		duration(time.Second, func(c *Config) *time.Duration { return &c.HTTP.MCPSessionIdleTimeout })},
	{"MAILSINK_AUTH_FAILURES_PER_MINUTE", "60", "wrong API keys (HTTP and SMTP AUTH together) per client address (IPv6: per /64) per minute; past it the address gets `429` (SMTP `454`) for every key but those that already worked from it, until the minute is over, so guesses learn nothing (loopback clients are exempt; `0`: no limit)",
		integer(0, 1000000, func(c *Config) *int { return &c.HTTP.AuthFailuresPerMinute })},
	{"MAILSINK_AUTH_LIMIT_LOOPBACK", "false", "apply that limit to loopback clients too (by default a test suite on the same host is never throttled)",
		boolean(func(c *Config) *bool { return &c.HTTP.AuthLimitLoopback })},
	{"MAILSINK_SHUTDOWN_TIMEOUT", "10s", "how long SIGTERM waits for in-flight SMTP transactions and HTTP requests",
		duration(positive, func(c *Config) *time.Duration { return &c.ShutdownTimeout })},
	{"MAILSINK_RETENTION_MAX_AGE", "168h", "delete emails received and stored longer ago than this (a Go duration: `24h`, `90m`); `0` keeps them forever",
		duration(0, func(c *Config) *time.Duration { return &c.Retention.MaxAge })},
	{"MAILSINK_RETENTION_MAX_EMAILS", "0", "keep at most this many emails per account, deleting the oldest; `0` is no limit",
		integer(0, 1<<53-1, func(c *Config) *int64 { return &c.Retention.MaxEmails })},
	{"MAILSINK_QUOTA_MAX_EMAILS", "0", "most emails one account may store; SMTP answers `452 4.2.2` to each RCPT that would take the account past it, counting the recipients the message already has in it (the message goes on to the others; one that fills it up between RCPT and the end of DATA is refused whole) and the API `429`; a webhook delivery with recipients in it is refused whole (its one answer is for all) with `503`, which providers retry; the refusal gives the account's figures only to its own key (API, SMTP AUTH, or any SMTP client when it is the only account); `0` is no limit (an account may override it: `quota` in the accounts file)",
		integer(0, 1<<53-1, func(c *Config) *int64 { return &c.Quota.MaxEmails })},
	{"MAILSINK_QUOTA_MAX_BYTES", "0", "most bytes of raw messages one account may store, likewise; `0` is no limit",
		integer(0, 1<<53-1, func(c *Config) *int64 { return &c.Quota.MaxBytes })},
	{"MAILSINK_RETENTION_GRACE", "5m", "never delete an email stored or received less than this long ago, whatever the rules say",
		duration(0, func(c *Config) *time.Duration { return &c.Retention.Grace })},
	{"MAILSINK_RETENTION_INTERVAL", "1m", "time between two rounds of retention (at least `1s`: a shorter round would keep the store busy for nothing)",
		duration(time.Second, func(c *Config) *time.Duration { return &c.Retention.Interval })},
	{"MAILSINK_WEBHOOKS_PER_ACCOUNT", "25", "most webhooks (`/v1/webhooks`) one account may have",
		integer(1, 10000, func(c *Config) *int { return &c.Webhooks.MaxPerAccount })},
	{"MAILSINK_WEBHOOK_MAX_URL_BYTES", "2048", "longest webhook URL accepted",
		integer(16, 65536, func(c *Config) *int { return &c.Webhooks.MaxURLBytes })},
	{"MAILSINK_WEBHOOK_POLL_INTERVAL", "1s", "how often each replica looks for new events and due webhook deliveries",
		duration(positive, func(c *Config) *time.Duration { return &c.Webhooks.PollInterval })},
	{"MAILSINK_WEBHOOK_TIMEOUT", "10s", "one delivery attempt, from dialling to reading the first 256 bytes of the answer; past it the attempt failed",
		duration(positive, func(c *Config) *time.Duration { return &c.Webhooks.AttemptTimeout })},
	{"MAILSINK_WEBHOOK_CONCURRENCY", "16", "delivery attempts under way at once per replica",
		integer(1, 10000, func(c *Config) *int { return &c.Webhooks.Concurrency })},
	{"MAILSINK_WEBHOOK_RETRY_BASE", "10s", "wait after a delivery's first failed attempt; each further failure doubles it",
		duration(positive, func(c *Config) *time.Duration { return &c.Webhooks.RetryBase })},
	{"MAILSINK_WEBHOOK_RETRY_MAX", "1h", "longest wait between two attempts of a delivery",
		duration(positive, func(c *Config) *time.Duration { return &c.Webhooks.RetryMax })},
	{"MAILSINK_WEBHOOK_RETRY_FOR", "24h", "how long a failing delivery is retried; then it is given up and its webhook disabled, with the reason shown",
		duration(positive, func(c *Config) *time.Duration { return &c.Webhooks.RetryFor })},
	{"MAILSINK_SPAMD_ADDR", "", "SpamAssassin's `spamd` (`host:port`) that scores messages for `GET /v1/emails/{id}/checks/spam` (the first 500 KB of each, as `spamc` does); unset, that check answers `409`, and a `spamd` that fails or cannot be reached `502`",
		hostPort(func(c *Config) *string { return &c.Checks.SpamdAddr })},
	{"MAILSINK_DNS_RESOLVER", "", "the DNS server (`host:port`) the checks ask: DKIM keys, SPF and DMARC policies (`/checks/auth`), link hosts (`/checks/links`); unset, the system's resolver",
		hostPort(func(c *Config) *string { return &c.Checks.DNSResolver })},
	{"MAILSINK_RELEASE_PER_MINUTE", "60", "emails one account may release to its relay (`POST /v1/emails/{id}/release`, `POST /v1/emails/release`) per minute, in bursts of as many; each email counts once, whatever its recipients; past it `429` with `Retry-After` (a bulk release answers the emails it could not send as not sent); `0`: no limit",
		integer(0, 100000, func(c *Config) *int { return &c.Release.PerMinute })},
	{"MAILSINK_RELEASE_TIMEOUT", "30s", "one release: connecting to the account's relay through TLS and `AUTH`, then sending each email (each email of a bulk release gets as long); past it the release failed (`502`) and the connection is closed",
		duration(time.Second, func(c *Config) *time.Duration { return &c.Release.Timeout })},
	{"MAILSINK_DASHBOARD_MARK_READ", "true", "opening a message in the dashboard marks it read (`read: true`, as `PATCH /v1/emails/{id}` does); `false` leaves read state to the API and to the dashboard's Mark read and Mark unread",
		boolean(func(c *Config) *bool { return &c.Dashboard.MarkRead })},
	{"MAILSINK_LOG_FORMAT", "text", "`text` or `json` (logs go to stderr)",
		oneOf(func(c *Config) *string { return &c.Log.Format }, "text", "json")},
	{"MAILSINK_LOG_LEVEL", "info", "`debug`, `info`, `warn` or `error`",
		oneOf(func(c *Config) *string { return &c.Log.Level }, "debug", "info", "warn", "error")},
	{"MAILSINK_TRUSTED_PROXIES", "", "comma-separated CIDRs of proxies (load balancers, ingress) whose `X-Forwarded-For` (HTTP) and PROXY protocol header (SMTP) name the client; per-address limits then apply to that client instead of the proxy",
		trustedProxies},
	{"MAILSINK_METRICS_PER_ACCOUNT", "false", "add `mailsink_stored_emails{account}`, `mailsink_stored_bytes{account}` and the account label of `mailsink_retention_deleted_total` to `/metrics` (which needs no key); off, `/metrics` names no account",
		boolean(func(c *Config) *bool { return &c.MetricsPerAccount })},
	{"MAILSINK_SNS_SIGNING_CERT_FILE", "", "a PEM certificate that verifies every SNS message on `/v1/inbound/ses` instead of the one at the message's `SigningCertURL` (air-gapped deployments, tests)",
		text(func(c *Config) *string { return &c.SNSSigningCertFile })},
	{"MAILSINK_PPROF_ADDR", "", "debugging: serve Go's `net/http/pprof` on this address (use a loopback one); the banner prints it",
		addr(func(c *Config) *string { return &c.PProfAddr })},
}

func tlsAuto(c *Config, v string) error {
	for _, h := range strings.Split(v, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if net.ParseIP(h) == nil && !validHostName(h) {
			return fmt.Errorf("%q is not a host name or an IP address", h)
		}
		c.TLS.AutoHosts = append(c.TLS.AutoHosts, h)
	}
	if len(c.TLS.AutoHosts) == 0 {
		return fmt.Errorf("%q names no host", v)
	}
	return nil
}

// validHostName reports whether h is a DNS name a certificate can carry:
// dot-separated labels of letters, digits, hyphens and underscores (compose
// service names may hold them), a leading "*." for a wildcard.
func validHostName(h string) bool {
	h = strings.TrimPrefix(h, "*.")
	if len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

func trustedProxies(c *Config, v string) error {
	t, err := clientaddr.Parse(v)
	if err != nil {
		return err
	}
	c.TrustedProxies = t
	return nil
}

// The parsers below each return the set function of a Setting: field picks
// the Config field the value goes to.

func text(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		*field(c) = v
		return nil
	}
}

func addr(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		host, port, err := net.SplitHostPort(v)
		if err != nil {
			return fmt.Errorf("%q is not a listen address like :8025 or 127.0.0.1:8025", v)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return fmt.Errorf("%q has no valid port", v)
		}
		if host != "" && host != "localhost" && net.ParseIP(host) == nil {
			return fmt.Errorf("%q: host must be an IP address or localhost", v)
		}
		*field(c) = v
		return nil
	}
}

// hostPort parses a server's address: a host name or IP address and a
// port.
func hostPort(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		host, port, err := net.SplitHostPort(v)
		if err != nil || host == "" {
			return fmt.Errorf("%q is not host:port like spamd:783 or 127.0.0.1:53", v)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q has no valid port", v)
		}
		if net.ParseIP(host) == nil && !validHostName(host) {
			return fmt.Errorf("%q: %q is not a host name or an IP address", v, host)
		}
		*field(c) = v
		return nil
	}
}

func boolean(field func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		*field(c) = b
		return nil
	}
}

func integer[T int | int64](lo, hi int64, field func(*Config) *T) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("%q is not a whole number from %d to %d", v, lo, hi)
		}
		*field(c) = T(n)
		return nil
	}
}

// positive is the least duration of the settings that cannot be turned off.
const positive = time.Nanosecond

// duration parses a Go duration of at least min; a min of 0 accepts 0,
// which turns a feature off.
func duration(min time.Duration, field func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		switch {
		case min == 0 && (err != nil || d < 0):
			return fmt.Errorf("%q is not a duration like 24h or 90m, or 0", v)
		case min > 0 && (err != nil || d <= 0):
			return fmt.Errorf("%q is not a positive duration like 30s", v)
		case d < min:
			return fmt.Errorf("%s is below the minimum of %s", d, min)
		}
		*field(c) = d
		return nil
	}
}

func oneOf(field func(*Config) *string, allowed ...string) func(*Config, string) error {
	return func(c *Config, v string) error {
		v = strings.ToLower(v)
		for _, a := range allowed {
			if v == a {
				*field(c) = v
				return nil
			}
		}
		return fmt.Errorf("%q is not one of %s", v, strings.Join(allowed, ", "))
	}
}

func redisURL(c *Config, v string) error {
	if !strings.HasPrefix(v, "redis://") && !strings.HasPrefix(v, "rediss://") {
		return fmt.Errorf("must start with redis:// or rediss://")
	}
	c.Store.RedisURL = v
	return nil
}

func redisCluster(c *Config, v string) error {
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		host, port, err := net.SplitHostPort(s)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || host == "" || n < 1 || n > 65535 {
			return fmt.Errorf("%q is not host:port", s)
		}
		c.Store.RedisCluster = append(c.Store.RedisCluster, s)
	}
	return nil
}

// apiKey makes the single default account with the key v. Load refuses it
// together with an accounts file.
func apiKey(c *Config, v string) error {
	c.Accounts = DefaultAccounts(v)
	return nil
}

// Unknown is a MAILSINK_ variable of the environment that is no setting: a
// misspelt name would otherwise be ignored in silence.
type Unknown struct {
	Name string
	// Hint names the setting meant, when one is close, or says where the
	// settings are listed.
	Hint string
}

// otherPrograms are MAILSINK_ variables that other programs read, which
// mailsink leaves alone: clients (MAILSINK_URL), compose's image tag
// (MAILSINK_VERSION), and this repository's tests and tools.
var otherPrograms = []string{"MAILSINK_URL", "MAILSINK_VERSION", "MAILSINK_BIN", "MAILSINK_AXE_JS", "MAILSINK_CHROMIUM",
	"MAILSINK_SCREENSHOTS", "MAILSINK_E2E_FIGURES", "MAILSINK_BENCH_INBUCKET"}

// UnknownVariables returns the MAILSINK_ variables of environ (os.Environ's
// "NAME=value" form) that are neither a setting nor another program's
// (otherPrograms, MAILSINK_TEST_*), in the order given.
func UnknownVariables(environ []string) []Unknown {
	var out []Unknown
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "MAILSINK_") || strings.HasPrefix(name, "MAILSINK_TEST_") || slices.Contains(otherPrograms, name) {
			continue
		}
		if slices.ContainsFunc(settings, func(s Setting) bool { return s.Name == name }) {
			continue
		}
		out = append(out, Unknown{Name: name, Hint: hint(name)})
	}
	return out
}

// hint names the setting a misspelt name likely means: the listener's
// _ADDR for a _PORT or _HOST, else the setting fewest edits away (at most
// three), else none.
func hint(name string) string {
	const listing = "mailsink --help lists the settings"
	for _, suffix := range []string{"_PORT", "_HOST", "_LISTEN", "_BIND"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			for _, s := range settings {
				if s.Name == base+"_ADDR" {
					return fmt.Sprintf("did you mean %s? it takes host:port (%s by default); %s", s.Name, s.Default, listing)
				}
			}
		}
	}
	best, bestDist := "", 4
	for _, s := range settings {
		if d := editDistance(name, s.Name); d < bestDist {
			best, bestDist = s.Name, d
		}
	}
	if best != "" {
		return fmt.Sprintf("did you mean %s? %s", best, listing)
	}
	return listing
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
