// Command mailsink is a test-mail sink: it receives email over SMTP and by
// webhook, keeps it per account, and serves it through a REST API.
//
//	mailsink serve    run the service (configured by MAILSINK_* variables)
//	mailsink healthcheck  exit 0 when the local mailsink is ready (for container health checks)
//	mailsink version  print the version
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/mailsink/mailsink/app"
	"github.com/mailsink/mailsink/config"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "serve":
		return serve(stdout, stderr)
	case "healthcheck":
		return healthcheck(stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "mailsink", version)
		return 0
	case "help", "--help", "-h":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "mailsink: unknown command %q\n", cmd)
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: mailsink [serve|healthcheck|version|help]

serve runs the service; it is configured by environment variables:
  MAILSINK_HTTP_ADDR (:8025)  MAILSINK_SMTP_ADDR (:1025)  MAILSINK_DATA_DIR (./data)
  MAILSINK_REDIS_URL  MAILSINK_REDIS_CLUSTER  MAILSINK_ACCOUNTS_FILE  MAILSINK_API_KEY
  MAILSINK_SMTP_AUTH_ALLOW_INSECURE (true)  MAILSINK_MAX_MESSAGE_BYTES (26214400)
See README.md for every setting.
`)
}

func serve(stdout, stderr io.Writer) int {
	cfg, err := config.Load(os.Getenv, os.ReadFile)
	if err != nil {
		fmt.Fprintln(stderr, "mailsink: configuration:", err)
		return 2
	}
	cfg.Version = version
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit(cfg))
	}
	log := newLogger(cfg.Log, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var pprofAddr net.Addr
	if cfg.PProfAddr != "" {
		ln, err := net.Listen("tcp", cfg.PProfAddr)
		if err != nil {
			fmt.Fprintln(stderr, "mailsink: configuration: MAILSINK_PPROF_ADDR:", err)
			return 2
		}
		defer ln.Close()
		pprofAddr = ln.Addr()
		go servePProf(ln)
	}
	err = app.Run(ctx, cfg, log, func(a *app.App) {
		fmt.Fprintf(stdout, "mailsink %s\n  SMTP  %s\n  HTTP  http://%s\n", version, dialable(a.SMTPAddr()), dialable(a.HTTPAddr()))
		if pprofAddr != nil {
			fmt.Fprintf(stdout, "  pprof http://%s\n", dialable(pprofAddr))
		}
		key := "<your key>"
		if cfg.GeneratedKey != "" {
			key = cfg.GeneratedKey
			fmt.Fprintf(stdout, "  API key of the default account (set MAILSINK_API_KEY to choose one): %s\n", key)
		}
		fmt.Fprintf(stdout, "  Try:  curl -H 'Authorization: Bearer %s' http://%s/v1/emails\nmailsink is ready\n", key, dialable(a.HTTPAddr()))
	})
	if err != nil {
		log.Error("mailsink stopped", "err", err)
		return 1
	}
	return 0
}

// healthcheck asks the mailsink on this host (at MAILSINK_HTTP_ADDR's port)
// whether it is ready: GET /readyz must answer 200 within 3 seconds. It lets
// a container without a shell or curl be health-checked.
func healthcheck(stderr io.Writer) int {
	addr := os.Getenv("MAILSINK_HTTP_ADDR")
	if addr == "" {
		addr = ":8025"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		fmt.Fprintln(stderr, "mailsink healthcheck: MAILSINK_HTTP_ADDR:", err)
		return 2
	}
	if host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified() {
		host = "127.0.0.1"
	}
	client := &http.Client{Timeout: 3 * time.Second}
	resp, err := client.Get("http://" + net.JoinHostPort(host, port) + "/readyz")
	if err != nil {
		fmt.Fprintln(stderr, "mailsink healthcheck:", err)
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(stderr, "mailsink healthcheck: /readyz answered", resp.Status)
		return 1
	}
	return 0
}

// memoryLimit is the soft memory limit mailsink gives Go's garbage
// collector unless GOMEMLIMIT sets one: 256 MiB for everything but large
// messages, plus three times the largest message for each large transfer
// under way (the message, the store's record of it, the store's write
// buffer). Without a limit the collector lets the heap grow to twice what is
// live, which after a burst of 25 MB messages is most of a gigabyte; with
// it, it collects sooner (docs/benchmarks.md). It is soft: past it the
// collector works harder, nothing fails.
func memoryLimit(cfg *config.Config) int64 {
	return 256<<20 + int64(cfg.SMTP.MaxLargeTransfers)*3*cfg.MaxMessageBytes
}

// servePProf serves net/http/pprof's handlers on ln, a debug listener that is
// only opened when MAILSINK_PPROF_ADDR asks for it (the load tool uses it to
// profile the server under load). It runs until ln is closed.
func servePProf(ln net.Listener) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	srv.Serve(ln)
}

func newLogger(cfg config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(cfg.Level))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// dialable returns addr as a client would dial it: a listener on all
// interfaces is shown as 127.0.0.1.
func dialable(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return addr.String()
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(tcp.Port))
}
