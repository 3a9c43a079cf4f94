// Package app wires mailsink together: it opens the store, builds the
// account registry, and starts the SMTP and HTTP servers and retention;
// Shutdown stops retention, drains the servers and closes the store. main
// and the end-to-end tests both use it.
package app

import (
	"context"
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

	"github.com/mailsink/mailsink/accounts"
	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/httpapi"
	"github.com/mailsink/mailsink/ingest"
	"github.com/mailsink/mailsink/internal/authlimit"
	"github.com/mailsink/mailsink/internal/gate"
	"github.com/mailsink/mailsink/metrics"
	"github.com/mailsink/mailsink/retention"
	"github.com/mailsink/mailsink/smtpd"
	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/boltstore"
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
	api       *httpapi.API
	metrics   *metrics.Metrics
	accounts  *accounts.Registry
	// large gives turns to large request bodies.
	large *gate.Gate

	// ctx is Start's, under which retention runs.
	ctx context.Context
	// reloadMu serialises reloads of the accounts file; under it are the
	// digest of the file's content last read and retention, which is
	// rebuilt for the new accounts (nil when the store cannot find its
	// oldest emails, then oldest is nil too).
	reloadMu   sync.Mutex
	oldest     store.Pruner
	lastDigest [32]byte
	retention  *retention.Pruner
	// stopWatch ends the accounts file's watcher, whose end closes
	// watchDone.
	stopWatch context.CancelFunc
	watchDone chan struct{}
}

// Start opens the store and starts both listeners. On error nothing is left
// running.
func Start(ctx context.Context, cfg *config.Config, log *slog.Logger) (*App, error) {
	st, name, err := openStore(cfg.Store)
	if err != nil {
		return nil, err
	}
	if g, ok := st.(interface{ Guarantee() string }); ok {
		// What a 250 means across a failover depends on the settings:
		// say it where operators look.
		log.Info("store opened", "store", name, "acknowledged", g.Guarantee())
	} else {
		log.Info("store opened", "store", name)
	}
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
	registry := prometheus.NewRegistry()
	m := metrics.New(registry, cfg.Version)
	m.PerAccount = cfg.MetricsPerAccount
	// The optional capabilities are found on the store itself: the
	// instrumented one has only store.Store and store.Notifier.
	raw := st
	if b, ok := st.(metrics.Backend); ok {
		st = m.InstrumentStore(b, backendName(st))
	}
	reg := accounts.New(cfg.Accounts)
	a := &App{cfg: cfg, log: log, store: st, storeName: "the store", metrics: m, accounts: reg, ctx: ctx}
	ing := ingest.New(st, time.Now, ingest.Config{
		MaxRecipients: cfg.SMTP.MaxRecipients,
		ParsePanics:   m.ParsePanics,
		Log:           log.With("component", "ingest"),
	})
	// One budget of wrong API keys per address, over HTTP and SMTP AUTH.
	guard := authlimit.New(cfg.HTTP.AuthFailuresPerMinute, time.Minute, !cfg.HTTP.AuthLimitLoopback, time.Now)
	if cfg.HTTP.AuthFailuresPerMinute > 0 && !cfg.HTTP.AuthLimitLoopback {
		log.Info("the wrong-key limit leaves loopback clients alone; behind a proxy on this host set MAILSINK_TRUSTED_PROXIES (or MAILSINK_AUTH_LIMIT_LOOPBACK=true)")
	}
	if stats, ok := raw.(store.Stats); ok {
		m.StoredEmails(stats, reg.Accounts, 2*time.Second)
	}

	a.smtp = smtpd.New(smtpd.Config{
		Addr:              cfg.SMTP.Addr,
		Domain:            "mailsink",
		StoreTimeout:      cfg.Store.Timeout,
		MaxMessageBytes:   cfg.MaxMessageBytes,
		MaxRecipients:     cfg.SMTP.MaxRecipients,
		AllowInsecureAuth: cfg.SMTP.AllowInsecureAuth,
		ReadTimeout:       cfg.SMTP.ReadTimeout,
		WriteTimeout:      cfg.SMTP.WriteTimeout,
		DataTimeout:       cfg.SMTP.DataTimeout,
		MaxConnections:    cfg.SMTP.MaxConnections,
		MaxLargeTransfers: cfg.SMTP.MaxLargeTransfers,
		AuthLimiter:       guard,
		Metrics:           m,
	}, reg, ing, log.With("component", "smtp"))
	a.large = gate.New(cfg.SMTP.MaxLargeTransfers, max(1, cfg.SMTP.MaxLargeTransfers/2))
	api := httpapi.New(httpapi.Config{
		// One client address may hold at most half of the turns, so that
		// it cannot keep everyone else's large requests waiting.
		LargeGate:         a.large,
		MaxMessageBytes:   cfg.MaxMessageBytes,
		MaxHeldPerAccount: cfg.HTTP.MaxHeldPerAccount,
		MaxJSONBytes:      cfg.HTTP.MaxJSONBytes,
		StoreTimeout:      cfg.Store.Timeout,
		SSEHeartbeat:      cfg.HTTP.SSEHeartbeat,
		SSEWriteTimeout:   cfg.HTTP.SSEWriteTimeout,
		AuthLimiter:       guard,
		Metrics:           m,
		MetricsHandler:    promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: registry}),
	}, st, reg, ing, log.With("component", "http"), time.Now)
	a.api = api
	m.HeldRequests(api.WaitingRequests, api.EventStreams)
	a.http = httpapi.NewServer(httpapi.ServerConfig{
		Addr:              cfg.HTTP.Addr,
		TrustedProxies:    cfg.TrustedProxies,
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout,
		ReadTimeout:       cfg.HTTP.ReadTimeout,
		WriteTimeout:      cfg.HTTP.WriteTimeout,
		IdleTimeout:       cfg.HTTP.IdleTimeout,
	}, api, log.With("component", "http"))

	if err := a.smtp.Start(); err != nil {
		st.Close()
		return nil, fmt.Errorf("MAILSINK_SMTP_ADDR %s: %w", cfg.SMTP.Addr, err)
	}
	if err := a.http.Start(); err != nil {
		a.smtp.Shutdown(ctx)
		st.Close()
		return nil, fmt.Errorf("MAILSINK_HTTP_ADDR %s: %w", cfg.HTTP.Addr, err)
	}
	if oldest, ok := raw.(store.Pruner); ok {
		a.oldest = oldest
		a.retention = retention.New(st, oldest, retentionConfig(cfg, cfg.Accounts, m, log.With("component", "retention")))
		a.retention.Start(ctx)
	}
	a.watchAccounts()
	log.Info("mailsink started", "smtp", a.smtp.Addr().String(), "http", a.http.Addr().String())
	return a, nil
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

func openStore(cfg config.Store) (store.Store, string, error) {
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
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, "", fmt.Errorf("MAILSINK_DATA_DIR: %w", err)
	}
	path := filepath.Join(cfg.DataDir, "mailsink.db")
	st, err := boltstore.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("MAILSINK_DATA_DIR: open %s: %w", path, err)
	}
	return st, "the embedded store at " + path, nil
}

// redisHost is the host:port of a Redis URL, without the password.
func redisHost(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return "the configured URL"
	}
	return u.Host
}

// backendName is the store label of the metrics.
func backendName(st store.Store) string {
	switch st.(type) {
	case *boltstore.Store:
		return "embedded"
	case *redisstore.Store:
		return "redis"
	}
	return "other"
}

// Metrics returns the app's metrics (tests assert on them).
func (a *App) Metrics() *metrics.Metrics { return a.metrics }

// LargeGate returns the turns that large request bodies take.
func (a *App) LargeGate() *gate.Gate { return a.large }

// SMTPAddr returns the SMTP listener's address.
func (a *App) SMTPAddr() net.Addr { return a.smtp.Addr() }

// HTTPAddr returns the HTTP listener's address.
func (a *App) HTTPAddr() net.Addr { return a.http.Addr() }

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
	errStore := a.store.Close()
	return errors.Join(errRetention, errSMTP, errHTTP, errStore)
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
