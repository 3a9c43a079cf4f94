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
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mailsink/mailsink/accounts"
	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/httpapi"
	"github.com/mailsink/mailsink/ingest"
	"github.com/mailsink/mailsink/internal/authlimit"
	"github.com/mailsink/mailsink/metrics"
	"github.com/mailsink/mailsink/retention"
	"github.com/mailsink/mailsink/smtpd"
	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/boltstore"
	"github.com/mailsink/mailsink/store/redisstore"
	"github.com/mailsink/mailsink/web"
)

// App is a running mailsink.
type App struct {
	cfg     *config.Config
	log     *slog.Logger
	store   store.Store
	smtp    *smtpd.Server
	http    *httpapi.Server
	api     *httpapi.API
	metrics *metrics.Metrics
	// retention is nil when the store cannot find its oldest emails.
	retention *retention.Pruner
}

// Start opens the store and starts both listeners. On error nothing is left
// running.
func Start(ctx context.Context, cfg *config.Config, log *slog.Logger) (*App, error) {
	st, backend, err := openStore(cfg.Store)
	if err != nil {
		return nil, err
	}
	log.Info("store opened", "store", backend)
	return StartWithStore(ctx, cfg, st, log)
}

// StartWithStore starts both listeners on an open store, which the App then
// owns and closes on Shutdown (or at once when starting fails), and
// retention, which runs until ctx is done or Shutdown.
func StartWithStore(ctx context.Context, cfg *config.Config, st store.Store, log *slog.Logger) (*App, error) {
	registry := prometheus.NewRegistry()
	m := metrics.New(registry, cfg.Version)
	// The optional capabilities are found on the store itself: the
	// instrumented one has only store.Store and store.Notifier.
	raw := st
	if b, ok := st.(metrics.Backend); ok {
		st = m.InstrumentStore(b, backendName(st))
	}
	a := &App{cfg: cfg, log: log, store: st, metrics: m}
	reg := accounts.New(cfg.Accounts)
	ing := ingest.New(st, time.Now)
	// One budget of wrong API keys per address, over HTTP and SMTP AUTH.
	guard := authlimit.New(cfg.HTTP.AuthFailuresPerMinute, time.Minute, !cfg.HTTP.AuthLimitLoopback, time.Now)
	if cfg.HTTP.AuthFailuresPerMinute > 0 && !cfg.HTTP.AuthLimitLoopback {
		log.Info("the wrong-key limit leaves loopback clients alone; behind a proxy on this host set MAILSINK_AUTH_LIMIT_LOOPBACK=true")
	}
	if stats, ok := raw.(store.Stats); ok {
		m.StoredEmails(stats, reg.Accounts(), 2*time.Second)
	}

	a.smtp = smtpd.New(smtpd.Config{
		Addr:              cfg.SMTP.Addr,
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
	api := httpapi.New(httpapi.Config{
		MaxMessageBytes:   cfg.MaxMessageBytes,
		MaxHeldPerAccount: cfg.HTTP.MaxHeldPerAccount,
		MaxJSONBytes:      cfg.HTTP.MaxJSONBytes,
		AuthLimiter:       guard,
		Metrics:           m,
		MetricsHandler:    promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: registry}),
		Dashboard: web.New(web.Config{
			Store: st, Accounts: reg, AuthLimiter: guard, Log: log.With("component", "web"),
		}),
	}, st, reg, ing, log.With("component", "http"), time.Now)
	a.api = api
	m.HeldRequests(api.WaitingRequests, api.EventStreams)
	a.http = httpapi.NewServer(httpapi.ServerConfig{
		Addr:              cfg.HTTP.Addr,
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
		a.retention = retention.New(st, oldest, retentionConfig(cfg, m, log.With("component", "retention")))
		a.retention.Start(ctx)
	}
	log.Info("mailsink started", "smtp", a.smtp.Addr().String(), "http", a.http.Addr().String())
	return a, nil
}

// retentionConfig gives each account its retention: its override from the
// accounts file, else the default.
func retentionConfig(cfg *config.Config, m *metrics.Metrics, log *slog.Logger) retention.Config {
	rc := retention.Config{Grace: cfg.Retention.Grace, Interval: cfg.Retention.Interval, Metrics: m, Log: log}
	for _, a := range cfg.Accounts {
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
		opts := redisstore.Options{Prefix: cfg.RedisPrefix}
		if len(cfg.RedisCluster) > 0 {
			return redisstore.New(client, opts), "redis cluster", nil
		}
		return redisstore.New(client, opts), "redis", nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, "", fmt.Errorf("MAILSINK_DATA_DIR: %w", err)
	}
	path := filepath.Join(cfg.DataDir, "mailsink.db")
	st, err := boltstore.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("MAILSINK_DATA_DIR: open %s: %w", path, err)
	}
	return st, "embedded " + path, nil
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
	errRetention := a.retention.Shutdown(ctx)
	errSMTP := a.smtp.Shutdown(ctx)
	a.api.StopHeld()
	errHTTP := a.http.Shutdown(ctx)
	errStore := a.store.Close()
	return errors.Join(errRetention, errSMTP, errHTTP, errStore)
}

// Run starts mailsink and runs it until ctx is cancelled, then shuts down
// within the configured timeout.
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger, banner func(*App)) error {
	a, err := Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	if banner != nil {
		banner(a)
	}
	<-ctx.Done()
	log.Info("shutting down", "timeout", cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	return a.Shutdown(sctx)
}

// HeldRequests returns how many HTTP requests are held open: list requests
// with wait, and event streams.
func (a *App) HeldRequests() int { return a.api.HeldRequests() }
