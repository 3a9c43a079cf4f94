// Package app wires mailsink together: it opens the store, builds the
// account registry, and starts the SMTP and HTTP servers and retention;
// Shutdown stops retention, drains the servers and closes the store. main
// and the end-to-end tests both use it.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/httpapi"
	"github.com/mailsink/mailsink/internal/accounts"
	"github.com/mailsink/mailsink/internal/authlimit"
	"github.com/mailsink/mailsink/internal/bodies"
	"github.com/mailsink/mailsink/internal/certs"
	"github.com/mailsink/mailsink/internal/checks"
	"github.com/mailsink/mailsink/internal/faults"
	"github.com/mailsink/mailsink/internal/gate"
	"github.com/mailsink/mailsink/internal/held"
	"github.com/mailsink/mailsink/internal/imapd"
	"github.com/mailsink/mailsink/internal/inbound"
	"github.com/mailsink/mailsink/internal/ingest"
	"github.com/mailsink/mailsink/internal/mailaccess"
	"github.com/mailsink/mailsink/internal/mcpserver"
	"github.com/mailsink/mailsink/internal/metrics"
	"github.com/mailsink/mailsink/internal/migrate"
	"github.com/mailsink/mailsink/internal/pop3d"
	"github.com/mailsink/mailsink/internal/relay"
	"github.com/mailsink/mailsink/internal/retention"
	"github.com/mailsink/mailsink/internal/search"
	"github.com/mailsink/mailsink/internal/web"
	"github.com/mailsink/mailsink/internal/webhooks"
	"github.com/mailsink/mailsink/smtpd"
	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/pebblestore"
	"github.com/mailsink/mailsink/store/redisstore"
)

// App is a running mailsink.
type App struct {
	cfg       *config.Config
	log       *slog.Logger
	store     store.Store
	storeName string
	smtp      *smtpd.Server
	http      *httpapi.Server
	https     *httpapi.Server // nil without MAILSINK_HTTPS_ADDR
	// imap and pop3 are the mail-client doors, nil without
	// MAILSINK_IMAP_ADDR, MAILSINK_POP3_ADDR.
	imap     *imapd.Server
	pop3     *pop3d.Server
	cert     *certs.Source // nil without a TLS certificate
	api      *httpapi.API
	metrics  *metrics.Metrics
	accounts *accounts.Registry
	// large gives turns to large request bodies.
	large *gate.Gate
	// bodies is the memory HTTP request bodies share (bodyBudget).
	bodies *gate.Budget
	// smtpBuffers is the memory SMTP messages' first MiB share
	// (MAILSINK_SMTP_MAX_BUFFERED_BYTES).
	smtpBuffers *gate.Budget
	// reads and indexReads read stored bodies for people and for search,
	// each under its share of the read budget.
	reads, indexReads *bodies.Service

	// ctx is Start's, under which retention runs.
	ctx context.Context
	// reloadMu serialises reloads of the accounts file; under it are the
	// digest of the file's content last read and retention, which is
	// rebuilt for the new accounts.
	reloadMu   sync.Mutex
	lastDigest [32]byte
	retention  *retention.Pruner
	// stopWatch ends the accounts file's watcher, whose end closes
	// watchDone.
	stopWatch context.CancelFunc
	watchDone chan struct{}
	// search keeps the search index; stopSearch ends it, whose end
	// closes searchDone.
	search     *search.Service
	stopSearch context.CancelFunc
	searchDone chan struct{}
	// webhooks delivers outbound webhooks; stopWebhooks ends its worker,
	// whose end closes webhooksDone.
	webhooks     *webhooks.Service
	stopWebhooks context.CancelFunc
	webhooksDone chan struct{}
}

// Start opens the store and starts both listeners. On error nothing is left
// running.
func Start(ctx context.Context, cfg *config.Config, log *slog.Logger) (*App, error) {
	st, name, err := openStore(ctx, cfg.Store, log)
	if err != nil {
		return nil, err
	}
	// What a 250 means across a failover depends on the settings: say it
	// where operators look.
	log.Info("store opened", "store", name, "acknowledged", st.Info().Guarantee)
	a, err := StartWithStore(ctx, cfg, st, log)
	if err != nil {
		return nil, err
	}
	a.storeName = name
	return a, nil
}

// StartWithStore starts both listeners on an open store, which the App then
// owns and closes on Shutdown (or at once when starting fails), and
// retention, which runs until ctx is done or Shutdown.
func StartWithStore(ctx context.Context, cfg *config.Config, st store.Store, log *slog.Logger) (*App, error) {
	cert, err := loadCertificate(cfg, log.With("component", "tls"))
	if err != nil {
		st.Close()
		return nil, err
	}
	registry := prometheus.NewRegistry()
	m := metrics.New(registry, cfg.Version)
	m.PerAccount = cfg.MetricsPerAccount
	info := st.Info()
	st = m.InstrumentStore(st, info.Name)
	reg := accounts.New(cfg.Accounts)
	a := &App{cfg: cfg, log: log, store: st, storeName: "the store", metrics: m, accounts: reg, ctx: ctx, cert: cert}
	var tlsConfig *tls.Config
	var certPEM func() []byte
	if cert != nil {
		tlsConfig, certPEM = cert.TLSConfig(), cert.PEM
	}
	ing := ingest.New(st, time.Now, ingest.Config{
		Quota: func(accountID string) (int64, int64) {
			acc, _ := reg.Config(accountID)
			q := cfg.Quota.For(acc)
			return q.MaxEmails, q.MaxBytes
		},
		MaxRecipients:   cfg.SMTP.MaxRecipients,
		MaxMessageBytes: cfg.MaxMessageBytes,
		ParsePanics:     m.ParsePanics,
		Log:             log.With("component", "ingest"),
		// Search makes the digests of mail stored here from the bytes
		// in hand (a.search is set below, before anything is delivered).
		Stored: func(raw []byte, emails []*store.Email) { a.search.Fresh(raw, emails) },
	})
	// Ingest stores bodies unparsed; readers get them parsed on first
	// read, under the read budget.
	// The read budget is shared by the readers people wait for (the API,
	// the dashboard, checks, the doors for agents and mail clients) and
	// search's background reads of new mail, which get a quarter of their
	// own: a large message being indexed must not make a person's read of
	// it wait, nor the other way round.
	indexBudget := cfg.Reads.Budget / 4
	reads := bodies.New(st, bodies.Config{
		Budget:      cfg.Reads.Budget - indexBudget,
		Wait:        cfg.Reads.Wait,
		ParsePanics: m.ParsePanics,
		Log:         log.With("component", "bodies"),
	})
	a.reads = reads
	a.indexReads = bodies.New(st, bodies.Config{Budget: indexBudget, Wait: time.Minute, CacheBytes: -1,
		ParsePanics: m.ParsePanics, Log: log.With("component", "search")})
	// Search keeps an index of every account in memory, from the store and
	// its events; the digests of bodies it needs are made in the
	// background, one at a time.
	a.search = search.NewService(st, search.Config{
		Accounts: reg.Accounts,
		Bodies:   a.indexReads,
		Timeout:  cfg.Store.Timeout,
		Log:      log.With("component", "search"),
	})
	// One budget of wrong API keys per address, over HTTP and SMTP AUTH.
	guard := authlimit.New(cfg.HTTP.AuthFailuresPerMinute, time.Minute, !cfg.HTTP.AuthLimitLoopback, time.Now)
	if cfg.HTTP.AuthFailuresPerMinute > 0 && !cfg.HTTP.AuthLimitLoopback {
		log.Info("the wrong-key limit leaves loopback clients alone; behind a proxy on this host set MAILSINK_TRUSTED_PROXIES (or MAILSINK_AUTH_LIMIT_LOOPBACK=true)")
	}
	m.StoredEmails(st, reg.Accounts, 2*time.Second)

	inject := faults.New(st, faults.Config{
		MaxDelay: faults.MaxDelay(cfg.SMTP.ReadTimeout),
		Metrics:  m,
		Log:      log.With("component", "faults"),
		// Every SMTP transaction reads its account's rules: over the
		// network a round trip, which concurrent transactions share.
		ShareReads: !info.Local,
		Local:      info.Local,
	})

	// Messages and request bodies past their first MiB take turns, SMTP and
	// HTTP together, so that memory does not grow with the number of
	// senders of large mail; one client address may hold at most half of
	// the turns, so that it cannot keep everyone else waiting.
	a.large = gate.New(cfg.SMTP.MaxLargeTransfers, max(1, cfg.SMTP.MaxLargeTransfers/2))

	a.webhooks = newWebhooks(cfg, st, reg, m, registry, log)
	checker, err := checks.New(reads, st, checks.Config{
		SpamdAddr:    cfg.Checks.SpamdAddr,
		DNSResolver:  cfg.Checks.DNSResolver,
		AllowPrivate: a.webhooks.AllowsPrivateTargets,
		StoreTimeout: cfg.Store.Timeout,
	})
	if err != nil {
		st.Close()
		return nil, err
	}

	// What SMTP sessions hold of their messages' first MiB, an eighth of
	// it per client address: four addresses cannot take it all.
	a.smtpBuffers = gate.NewBudget(cfg.SMTP.MaxBufferedBytes, cfg.SMTP.MaxBufferedBytes/8)
	a.smtp = smtpd.New(smtpd.Config{
		Addr:              cfg.SMTP.Addr,
		Domain:            "mailsink",
		TLS:               tlsConfig,
		TLSAddr:           cfg.SMTP.TLSAddr,
		RequireTLS:        cfg.SMTP.RequireTLS,
		TrustedProxies:    cfg.TrustedProxies,
		StoreTimeout:      cfg.Store.Timeout,
		MaxMessageBytes:   cfg.MaxMessageBytes,
		MaxRecipients:     cfg.SMTP.MaxRecipients,
		AllowInsecureAuth: cfg.SMTP.AllowInsecureAuth,
		ReadTimeout:       cfg.SMTP.ReadTimeout,
		WriteTimeout:      cfg.SMTP.WriteTimeout,
		DataTimeout:       cfg.SMTP.DataTimeout,
		Connections: smtpd.ConnectionLimits{
			Total:      cfg.SMTP.MaxConnections,
			PerAddress: cfg.SMTP.MaxConnectionsPerAddress,
			PerNetwork: cfg.SMTP.MaxConnectionsPerNetwork,
		},
		LimitLoopback: cfg.SMTP.LimitLoopback,
		Buffers:       a.smtpBuffers,
		LargeGate:     a.large,
		AuthLimiter:   guard,
		Metrics:       m,
		Faults:        inject,
	}, reg, ing, log.With("component", "smtp"))
	a.bodies = gate.NewBudget(bodyBudget, bodyBudget/2)
	// List waits, event streams and MCP's waits share one budget per
	// account.
	heldRequests := held.NewLimiter(cfg.HTTP.MaxHeldPerAccount)
	mailboxes := &mcpserver.LocalConfig{Store: st, Bodies: reads, Held: heldRequests, StoreTimeout: cfg.Store.Timeout, Account: reg.ByID,
		Search: a.search}
	api := httpapi.New(httpapi.Config{
		Bodies:          reads,
		Search:          a.search,
		LargeGate:       a.large,
		BodyBudget:      a.bodies,
		MaxRecipients:   cfg.SMTP.MaxRecipients,
		Writes:          m.Writes.State,
		MaxMessageBytes: cfg.MaxMessageBytes,
		Held:            heldRequests,
		MaxJSONBytes:    cfg.HTTP.MaxJSONBytes,
		StoreTimeout:    cfg.Store.Timeout,
		SSEHeartbeat:    cfg.HTTP.SSEHeartbeat,
		SSEWriteTimeout: cfg.HTTP.SSEWriteTimeout,
		AuthLimiter:     guard,
		Metrics:         m,
		MetricsHandler:  promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: registry}),
		Dashboard: web.New(web.Config{
			Bodies: reads, Accounts: reg, AuthLimiter: guard, Log: log.With("component", "web"),
			Sessions: st, MarkRead: cfg.Dashboard.MarkRead,
		}),
		Certificate: certPEM,
		Faults:      inject,
		Webhooks:    a.webhooks,
		Checks:      checker,
		MCP: mcpserver.NewHTTP(mcpserver.HTTPConfig{
			MaxSessionsPerAccount: cfg.HTTP.MCPMaxSessionsPerAccount,
			SessionIdleTimeout:    cfg.HTTP.MCPSessionIdleTimeout,
			WriteTimeout:          cfg.HTTP.WriteTimeout,
			Version:               cfg.Version,
			Log:                   log.With("component", "mcp"),
		}, func(acc *store.Account) mcpserver.Mailbox { return mcpserver.NewLocal(mailboxes, acc) }),
		Relay: relay.New(relay.Config{
			PerMinute: cfg.Release.PerMinute,
			Timeout:   cfg.Release.Timeout,
			Metrics:   metrics.NewReleases(registry),
			Log:       log.With("component", "release"),
		}, reg, reads),
		SNS: inbound.NewSNS(cfg.SNSClient, cfg.SNSSigningCert),
	}, st, reg, ing, log.With("component", "http"), time.Now)
	a.api = api
	// The mail-client doors share the wrong-key limit with the API and
	// SMTP AUTH, and their connection bounds with each other.
	mc := cfg.Mailbox
	access := mailaccess.New(mailaccess.Config{Keys: reg, AuthLimiter: guard,
		PerAddress: mc.MaxConnectionsPerAddress, PerAccount: mc.MaxConnectionsPerAccount})
	doors := doorsConfig{access: access, metrics: metrics.NewDoors(registry), tls: tlsConfig, reads: reads,
		insecureAuth: cfg.SMTP.AllowInsecureAuth && !cfg.SMTP.RequireTLS}
	m.HeldRequests(api.WaitingRequests, api.EventStreams)
	httpConfig := httpapi.ServerConfig{
		Addr:              cfg.HTTP.Addr,
		TrustedProxies:    cfg.TrustedProxies,
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout,
		ReadTimeout:       cfg.HTTP.ReadTimeout,
		WriteTimeout:      cfg.HTTP.WriteTimeout,
		IdleTimeout:       cfg.HTTP.IdleTimeout,
	}
	a.http = httpapi.NewServer(httpConfig, api, log.With("component", "http"))
	if cfg.HTTP.TLSAddr != "" && tlsConfig != nil {
		httpConfig.Addr, httpConfig.TLS = cfg.HTTP.TLSAddr, tlsConfig
		a.https = httpapi.NewServer(httpConfig, api, log.With("component", "https"))
	}

	if err := a.smtp.Start(); err != nil {
		st.Close()
		var le *smtpd.ListenError
		if errors.As(err, &le) {
			return nil, fmt.Errorf("MAILSINK_SMTPS_ADDR %s: %w", le.Addr, le.Err)
		}
		return nil, fmt.Errorf("MAILSINK_SMTP_ADDR %s: %w", cfg.SMTP.Addr, err)
	}
	if err := a.http.Start(); err != nil {
		a.smtp.Shutdown(ctx)
		st.Close()
		return nil, fmt.Errorf("MAILSINK_HTTP_ADDR %s: %w", cfg.HTTP.Addr, err)
	}
	if a.https != nil {
		if err := a.https.Start(); err != nil {
			a.smtp.Shutdown(ctx)
			a.http.Shutdown(ctx)
			st.Close()
			return nil, fmt.Errorf("MAILSINK_HTTPS_ADDR %s: %w", cfg.HTTP.TLSAddr, err)
		}
	}
	if err := a.startDoors(doors); err != nil {
		a.smtp.Shutdown(ctx)
		a.http.Shutdown(ctx)
		if a.https != nil {
			a.https.Shutdown(ctx)
		}
		st.Close()
		return nil, err
	}
	a.retention = retention.New(st, retentionConfig(cfg, cfg.Accounts, m, log.With("component", "retention")))
	a.retention.Start(ctx)
	a.watchAccounts()
	attrs := []any{"smtp", a.smtp.Addr().String(), "http", a.http.Addr().String()}
	if addr := a.SMTPSAddr(); addr != nil {
		attrs = append(attrs, "smtps", addr.String())
	}
	if addr := a.HTTPSAddr(); addr != nil {
		attrs = append(attrs, "https", addr.String())
	}
	for _, door := range []struct {
		name string
		addr net.Addr
	}{{"imap", a.IMAPAddr()}, {"imaps", a.IMAPSAddr()}, {"pop3", a.POP3Addr()}, {"pop3s", a.POP3SAddr()}} {
		if door.addr != nil {
			attrs = append(attrs, door.name, door.addr.String())
		}
	}
	if cert != nil {
		attrs = append(attrs, "tls_sha256", certs.Fingerprint(cert.Leaf()))
		if cert.CertFile() != "" {
			attrs = append(attrs, "tls_cert", cert.CertFile())
		}
	}
	a.startWebhooks(ctx)
	a.startSearch(ctx)
	log.Info("mailsink started", attrs...)
	return a, nil
}

// doorsConfig is what the mail-client doors share.
type doorsConfig struct {
	access       *mailaccess.Access
	metrics      *metrics.Doors
	tls          *tls.Config
	reads        *bodies.Service
	insecureAuth bool
}

// startDoors starts the IMAP and POP3 doors that are configured. Its
// errors name the setting; on error nothing of them is left running.
func (a *App) startDoors(d doorsConfig) error {
	mc := a.cfg.Mailbox
	if mc.IMAPAddr != "" {
		a.imap = imapd.New(imapd.Config{
			Addr: mc.IMAPAddr, TLSAddr: mc.IMAPSAddr, TLS: d.tls, AllowInsecureAuth: d.insecureAuth,
			MaxMessages: mc.MaxMessages, StoreTimeout: a.cfg.Store.Timeout, Access: d.access, Metrics: d.metrics,
		}, a.store, a.search, d.reads, a.log.With("component", "imap"))
		if err := a.imap.Start(); err != nil {
			a.imap = nil
			var le *mailaccess.ListenError
			if errors.As(err, &le) {
				return fmt.Errorf("MAILSINK_IMAPS_ADDR %s: %w", le.Addr, le.Err)
			}
			return fmt.Errorf("MAILSINK_IMAP_ADDR %s: %w", mc.IMAPAddr, err)
		}
	}
	if mc.POP3Addr == "" {
		return nil
	}
	a.pop3 = pop3d.New(pop3d.Config{
		Addr: mc.POP3Addr, TLSAddr: mc.POP3SAddr, TLS: d.tls, AllowInsecureAuth: d.insecureAuth,
		MaxMessages: mc.MaxMessages, StoreTimeout: a.cfg.Store.Timeout, Access: d.access, Metrics: d.metrics,
	}, a.store, d.reads, a.log.With("component", "pop3"))
	if err := a.pop3.Start(); err != nil {
		a.pop3 = nil
		if a.imap != nil {
			a.imap.Shutdown(context.Background())
			a.imap = nil
		}
		var le *mailaccess.ListenError
		if errors.As(err, &le) {
			return fmt.Errorf("MAILSINK_POP3S_ADDR %s: %w", le.Addr, le.Err)
		}
		return fmt.Errorf("MAILSINK_POP3_ADDR %s: %w", mc.POP3Addr, err)
	}
	return nil
}

// shutdownDoors closes the mail-client doors' connections.
func (a *App) shutdownDoors(ctx context.Context) error {
	var errIMAP, errPOP3 error
	if a.imap != nil {
		errIMAP = a.imap.Shutdown(ctx)
	}
	if a.pop3 != nil {
		errPOP3 = a.pop3.Shutdown(ctx)
	}
	return errors.Join(errIMAP, errPOP3)
}

// IMAPAddr returns the IMAP listener's address, or nil.
func (a *App) IMAPAddr() net.Addr {
	if a.imap == nil {
		return nil
	}
	return a.imap.Addr()
}

// IMAPSAddr returns the implicit-TLS IMAP listener's address, or nil.
func (a *App) IMAPSAddr() net.Addr {
	if a.imap == nil {
		return nil
	}
	return a.imap.TLSAddr()
}

// POP3Addr returns the POP3 listener's address, or nil.
func (a *App) POP3Addr() net.Addr {
	if a.pop3 == nil {
		return nil
	}
	return a.pop3.Addr()
}

// POP3SAddr returns the implicit-TLS POP3 listener's address, or nil.
func (a *App) POP3SAddr() net.Addr {
	if a.pop3 == nil {
		return nil
	}
	return a.pop3.TLSAddr()
}

// loadCertificate returns the certificate of the TLS settings, or nil when
// there is none. Its errors name the setting.
func loadCertificate(cfg *config.Config, log *slog.Logger) (*certs.Source, error) {
	t := cfg.TLS
	switch {
	case t.CertFile != "":
		s, err := certs.Load(t.CertFile, t.KeyFile, log)
		if err != nil {
			return nil, fmt.Errorf("MAILSINK_SMTP_TLS_CERT, MAILSINK_SMTP_TLS_KEY: %w", err)
		}
		return s, nil
	case len(t.AutoHosts) > 0 && cfg.Store.InMemory():
		s, err := certs.Ephemeral(t.AutoHosts, log)
		if err != nil {
			return nil, fmt.Errorf("MAILSINK_SMTP_TLS_AUTO: %w", err)
		}
		log.Info("made a self-signed TLS certificate for this run, kept in memory", "names", strings.Join(t.AutoHosts, ","))
		return s, nil
	case len(t.AutoHosts) > 0:
		s, made, err := certs.Auto(cfg.Store.DataDir, t.AutoHosts, log)
		if err != nil {
			return nil, fmt.Errorf("MAILSINK_SMTP_TLS_AUTO: a self-signed certificate is kept in MAILSINK_DATA_DIR, but: %w", err)
		}
		if made {
			log.Info("made a self-signed TLS certificate", "file", s.CertFile(), "names", strings.Join(t.AutoHosts, ","))
		}
		return s, nil
	}
	return nil, nil
}

// newWebhooks returns the webhook service.
func newWebhooks(cfg *config.Config, st store.Store, reg *accounts.Registry, m *metrics.Metrics,
	registry prometheus.Registerer, log *slog.Logger) *webhooks.Service {
	w := cfg.Webhooks
	s := webhooks.New(webhooks.Config{
		MaxPerAccount:  w.MaxPerAccount,
		MaxURLLength:   w.MaxURLBytes,
		PollInterval:   w.PollInterval,
		AttemptTimeout: w.AttemptTimeout,
		Concurrency:    w.Concurrency,
		RetryBase:      w.RetryBase,
		RetryMax:       w.RetryMax,
		RetryFor:       w.RetryFor,
	}, st, st, reg.ByID, log.With("component", "webhooks"), metrics.NewWebhooks(registry), nil)
	s.SetPrivateTargets(privateTargets(cfg.Accounts))
	return s
}

// privateTargets are the ids of the accounts whose webhooks may reach
// private addresses.
func privateTargets(accs []config.Account) []string {
	var ids []string
	for _, a := range accs {
		if a.Webhooks.AllowPrivateTargets {
			ids = append(ids, a.ID)
		}
	}
	return ids
}

// startSearch runs the search index until Shutdown.
func (a *App) startSearch(ctx context.Context) {
	a.searchDone = make(chan struct{})
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.stopSearch = cancel
	go func() {
		defer close(a.searchDone)
		a.search.Run(sctx)
	}()
}

// startWebhooks runs the webhook worker until Shutdown.
func (a *App) startWebhooks(ctx context.Context) {
	a.webhooksDone = make(chan struct{})
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.stopWebhooks = cancel
	go func() {
		defer close(a.webhooksDone)
		a.webhooks.Run(wctx)
	}()
}

// shutdownWebhooks stops the worker and waits, until ctx is done, for the
// attempts under way (each bounded by MAILSINK_WEBHOOK_TIMEOUT); one cut
// short is attempted again when its lease ends.
func (a *App) shutdownWebhooks(ctx context.Context) error {
	a.stopWebhooks()
	select {
	case <-a.webhooksDone:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("webhook deliveries still under way: %w", ctx.Err())
	}
}

// retentionConfig gives each account its retention: its override from the
// accounts file, else the default.
func retentionConfig(cfg *config.Config, accs []config.Account, m *metrics.Metrics, log *slog.Logger) retention.Config {
	rc := retention.Config{Grace: cfg.Retention.Grace, Interval: cfg.Retention.Interval, Metrics: m, Log: log}
	for _, a := range accs {
		maxAge, maxEmails := cfg.Retention.For(a)
		rc.Accounts = append(rc.Accounts, retention.Account{ID: a.ID, Slug: a.Slug, MaxAge: maxAge, MaxEmails: maxEmails})
	}
	return rc
}

func openStore(ctx context.Context, cfg config.Store, log *slog.Logger) (store.Store, string, error) {
	if cfg.UsesRedis() {
		client, err := redisstore.NewClient(cfg.RedisURL, cfg.RedisCluster)
		if err != nil {
			return nil, "", fmt.Errorf("MAILSINK_REDIS_URL: %w", err)
		}
		opts := redisstore.Options{Prefix: cfg.RedisPrefix, AckReplicas: cfg.RedisAckReplicas, AckTimeout: cfg.RedisAckTimeout}
		if len(cfg.RedisCluster) > 0 {
			return redisstore.New(client, opts), "Redis Cluster at " + strings.Join(cfg.RedisCluster, ","), nil
		}
		return redisstore.New(client, opts), "Redis at " + redisHost(cfg.RedisURL), nil
	}
	log = log.With("component", "store")
	if cfg.InMemory() {
		st, err := pebblestore.OpenInMemory(cfg.MemoryMaxBytes, pebblestore.WithLogger(log))
		if err != nil {
			return nil, "", fmt.Errorf("MAILSINK_DATA_DIR=%s: %w", config.MemoryDataDir, err)
		}
		return st, "the embedded store in memory", nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, "", fmt.Errorf("MAILSINK_DATA_DIR: %w", err)
	}
	if err := migrate.Run(ctx, cfg.DataDir, StoreDir, log); err != nil {
		return nil, "", fmt.Errorf("MAILSINK_DATA_DIR: %w", err)
	}
	path := filepath.Join(cfg.DataDir, StoreDir)
	st, err := pebblestore.Open(path, pebblestore.WithLogger(log))
	if err != nil {
		return nil, "", fmt.Errorf("MAILSINK_DATA_DIR: open %s: %w", path, err)
	}
	return st, "the embedded store at " + path, nil
}

// StoreDir is the embedded store's directory in MAILSINK_DATA_DIR.
const StoreDir = "store"

// redisHost is the host:port of a Redis URL, without the password.
func redisHost(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return "the configured URL"
	}
	return u.Host
}

// Metrics returns the app's metrics (tests assert on them).
func (a *App) Metrics() *metrics.Metrics { return a.metrics }

// bodyBudget bounds the memory of HTTP request bodies' first MiB, read and
// in use at once; a client address, and an account, may hold half of it
// (httpapi.Config.BodyBudget). Bodies are a few KiB in the usual requests:
// the bound is met only by many large bodies at once.
const bodyBudget = 64 << 20

// LargeGate returns the turns that large request bodies take.
func (a *App) LargeGate() *gate.Gate { return a.large }

// MemoryHeld returns the bytes that messages and reads hold now, for the
// memory limit (package memlimit): what the SMTP buffers, the HTTP request
// bodies and the reads of stored bodies hold of their budgets.
func (a *App) MemoryHeld() int64 {
	return a.smtpBuffers.Used() + a.bodies.Used() + a.reads.Used() + a.indexReads.Used()
}

// LargeTransfers reports whether a large message or request body is being
// received (its turn taken), for the memory limit.
func (a *App) LargeTransfers() bool {
	active, _ := a.large.Counts()
	return active > 0
}

// BodyBudget returns the memory that request bodies' first MiB share.
func (a *App) BodyBudget() *gate.Budget { return a.bodies }

// SMTPBuffers returns the memory that SMTP messages' first MiB share.
func (a *App) SMTPBuffers() *gate.Budget { return a.smtpBuffers }

// SMTPAddr returns the SMTP listener's address.
func (a *App) SMTPAddr() net.Addr { return a.smtp.Addr() }

// HTTPAddr returns the HTTP listener's address.
func (a *App) HTTPAddr() net.Addr { return a.http.Addr() }

// SMTPSAddr returns the implicit-TLS SMTP listener's address, or nil.
func (a *App) SMTPSAddr() net.Addr { return a.smtp.TLSAddr() }

// HTTPSAddr returns the HTTPS listener's address, or nil.
func (a *App) HTTPSAddr() net.Addr {
	if a.https == nil {
		return nil
	}
	return a.https.Addr()
}

// Certificate returns the TLS certificate in use, or nil when there is none.
func (a *App) Certificate() *certs.Source { return a.cert }

// Store returns the app's store (tests look at it directly).
func (a *App) Store() store.Store { return a.store }

// Shutdown stops retention, stops accepting, lets in-flight SMTP
// transactions and HTTP requests finish until ctx is done, then closes the
// store.
func (a *App) Shutdown(ctx context.Context) error {
	a.stopWatch()
	<-a.watchDone
	a.reloadMu.Lock()
	errRetention := a.retention.Shutdown(ctx)
	a.reloadMu.Unlock()
	errSMTP := a.smtp.Shutdown(ctx)
	a.api.StopHeld()
	errHTTP := a.http.Shutdown(ctx)
	errDoors := a.shutdownDoors(ctx)
	errWebhooks := a.shutdownWebhooks(ctx)
	a.stopSearch()
	<-a.searchDone
	errStore := a.store.Close()
	return errors.Join(errRetention, errSMTP, errHTTP, errDoors, errWebhooks, errStore)
}

// Run starts mailsink, calls started, and runs until ctx is cancelled,
// reloading the accounts file whenever reload delivers (main sends SIGHUP
// there); then it shuts down within the configured timeout.
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger, reload <-chan os.Signal, started func(*App)) error {
	a, err := Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	if started != nil {
		started(a)
	}
	for ctx.Err() == nil {
		select {
		case <-reload:
			a.ReloadAccounts()
		case <-ctx.Done():
		}
	}
	log.Info("shutting down", "timeout", cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	return a.Shutdown(sctx)
}

// StoreName says which store the app uses, as "Redis at 127.0.0.1:6379".
func (a *App) StoreName() string { return a.storeName }

// WaitForStore returns nil once the store answers a ping, polling every
// interval; before that it calls waiting with each ping error that differs
// from the previous one. It returns ctx's error if ctx ends first.
func (a *App) WaitForStore(ctx context.Context, interval time.Duration, waiting func(error)) error {
	var last string
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := a.store.Ping(pctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err.Error() != last {
			last = err.Error()
			waiting(err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// HeldRequests returns how many HTTP requests are held open: list requests
// with wait, and event streams.
func (a *App) HeldRequests() int { return a.api.HeldRequests() }
