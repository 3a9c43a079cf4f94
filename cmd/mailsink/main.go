// Command mailsink is a test-mail sink: it receives email over SMTP and by
// webhook, keeps it per account, and serves it through a REST API.
//
//	mailsink serve    run the service (configured by MAILSINK_* variables; --help lists them)
//	mailsink healthcheck  exit 0 when the local mailsink is ready (for container health checks)
//	mailsink mcp --url URL  serve the MCP tools over stdio for a running mailsink (docs/agents.md)
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
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/app"
	"github.com/mailsink/mailsink/internal/certs"
	"github.com/mailsink/mailsink/internal/memlimit"
	"github.com/mailsink/mailsink/internal/web"
	"github.com/mailsink/mailsink/store/redisstore"
)

// version is set at build time with -ldflags "-X main.version=..." (make
// build, make release); unset, the version comes from the build information
// Go records in the binary (versionOf).
var version string

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
			usage(stdout)
			return 0
		}
		if len(args) > 0 {
			fmt.Fprintf(stderr, "mailsink serve takes no arguments (it is configured by MAILSINK_* variables), got %q\n", args)
			return 2
		}
		return serve(stdout, stderr)
	case "healthcheck":
		return healthcheck(stderr)
	case "mcp":
		return mcpStdio(args, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "mailsink", versionOf(version, readBuildInfo()))
		return 0
	case "help", "--help", "-h":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "mailsink: unknown command %q\n", cmd)
	usage(stderr)
	return 2
}

// mdLink is a Markdown link of a setting's help, [text](target).
var mdLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// plainHelp is a setting's help (Markdown, for docs/configuration.md) as plain text:
// code spans lose their backticks, links keep their text.
func plainHelp(s string) string {
	return mdLink.ReplaceAllString(strings.ReplaceAll(s, "`", ""), "$1")
}

// usage prints the commands and every setting of config.Settings.
func usage(w io.Writer) {
	fmt.Fprint(w, `usage: mailsink [serve|healthcheck|mcp|version|help]

  serve        run the service (the default command)
  healthcheck  exit 0 when the local mailsink is ready (for container health checks)
  mcp --url URL  serve the MCP tools for AI agents over stdio, talking to the mailsink at URL
               (key: MAILSINK_API_KEY; docs/agents.md)
  version      print the version

serve is configured by these environment variables (an empty one counts as unset):
`)
	for _, s := range config.Settings() {
		def := s.Default
		if def == "" {
			def = "unset"
		}
		fmt.Fprintf(w, "\n  %s (default: %s)\n", s.Name, def)
		line := "     "
		for _, word := range strings.Fields(plainHelp(s.Help)) {
			if len(line)+1+len(word) > 80 {
				fmt.Fprintln(w, line)
				line = "     "
			}
			line += " " + word
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprint(w, "\nSIGHUP reloads the accounts file. docs/configuration.md says more.\n")
}

func serve(stdout, stderr io.Writer) int {
	cfg, err := config.Load(os.Getenv, os.ReadFile)
	if err != nil {
		fmt.Fprintln(stderr, "mailsink: configuration:", err)
		return 2
	}
	generatedKey, err := cfg.UseKeyFile()
	if err != nil {
		fmt.Fprintln(stderr, "mailsink: configuration:", err)
		return 2
	}
	cfg.Version = versionOf(version, readBuildInfo())
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	log := newLogger(cfg.Log, stderr)
	for _, u := range config.UnknownVariables(os.Environ()) {
		log.Warn("not a setting, ignored", "variable", u.Name, "hint", u.Hint)
	}
	if cfg.Store.UsesRedis() {
		// go-redis logs through one process-wide logger.
		redis.SetLogger(redisstore.NewClientLogger(log.With("component", "redis"), time.Now))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
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
	err = app.Run(ctx, cfg, log, hup, func(a *app.App) {
		if os.Getenv("GOMEMLIMIT") == "" {
			go memlimit.New(memlimit.Config{Held: a.MemoryHeld, Large: a.LargeTransfers, Max: worstMemory(cfg)}).Run(ctx)
		}
		go banner(ctx, stdout, a, cfg, generatedKey, pprofAddr)
	})
	if err != nil {
		log.Error("mailsink stopped", "err", err)
		return 1
	}
	return 0
}

// banner prints, on stdout and never to the logs since it may hold the
// API key, where mailsink listens and how to call it, then "mailsink is
// ready" once the store answers, saying meanwhile what it waits for.
func banner(ctx context.Context, w io.Writer, a *app.App, cfg *config.Config, generatedKey string, pprofAddr net.Addr) {
	// The listeners are named as bound; the links use an address that
	// reaches them from this host.
	httpAddr := dialable(a.HTTPAddr())
	// The start that makes the key up prints it anyway: its dashboard link
	// signs in at once (the key is in the URL fragment, which a browser
	// never sends to a server).
	dashboard := "http://" + httpAddr + "/"
	if generatedKey != "" {
		dashboard = web.SignInURL("http://"+httpAddr, generatedKey)
	}
	fmt.Fprintf(w, "mailsink %s\n  SMTP  %s\n  HTTP  %s\n  Dashboard %s\n", cfg.Version, bound("", a.SMTPAddr()), bound("http://", a.HTTPAddr()), dashboard)
	if addr := a.SMTPSAddr(); addr != nil {
		fmt.Fprintf(w, "  SMTPS %s (implicit TLS)\n", bound("", addr))
	}
	if addr := a.HTTPSAddr(); addr != nil {
		fmt.Fprintf(w, "  HTTPS %s\n", bound("https://", addr))
	}
	for _, door := range []struct {
		name string
		addr net.Addr
		note string
	}{
		{"IMAP ", a.IMAPAddr(), ""}, {"IMAPS", a.IMAPSAddr(), " (implicit TLS)"},
		{"POP3 ", a.POP3Addr(), ""}, {"POP3S", a.POP3SAddr(), " (implicit TLS)"},
	} {
		if door.addr != nil {
			fmt.Fprintf(w, "  %s %s%s: any user name, an API key as the password\n", door.name, bound("", door.addr), door.note)
		}
	}
	if cert := a.Certificate(); cert != nil {
		where := cert.CertFile()
		if where == "" {
			where = "made for this run, kept in memory"
		}
		fmt.Fprintf(w, "  TLS certificate %s (STARTTLS offered), SHA-256 fingerprint:\n    %s\n  Trust it: curl -o mailsink.pem http://%s/tls/certificate.pem\n",
			where, certs.Fingerprint(cert.Leaf()), httpAddr)
	}
	if cfg.Store.InMemory() && !cfg.Store.UsesRedis() {
		fmt.Fprintf(w, "  Store in memory (MAILSINK_DATA_DIR=%s, at most %d bytes): nothing survives a restart\n",
			config.MemoryDataDir, cfg.Store.MemoryMaxBytes)
	}
	if pprofAddr != nil {
		fmt.Fprintf(w, "  pprof %s\n", bound("http://", pprofAddr))
	}
	bearer := "<your key>"
	if generatedKey != "" && cfg.KeyFile == "" {
		bearer = generatedKey
		fmt.Fprintf(w, "  API key of the default account (set MAILSINK_API_KEY to choose one): %s\n", generatedKey)
		fmt.Fprintln(w, "  (made for this run and kept nowhere: the next start makes another)")
	}
	if cfg.KeyFile != "" {
		path, err := filepath.Abs(cfg.KeyFile)
		if err != nil {
			path = cfg.KeyFile
		}
		bearer = "$(cat " + path + ")"
		if generatedKey != "" {
			bearer = generatedKey
			fmt.Fprintf(w, "  API key of the default account (set MAILSINK_API_KEY to choose one): %s\n", generatedKey)
			fmt.Fprintf(w, "  (new: kept in %s for the next starts)\n", path)
		} else {
			fmt.Fprintf(w, "  API key of the default account: in %s (set MAILSINK_API_KEY to choose one)\n", path)
		}
	}
	fmt.Fprintf(w, "  Try:  curl -H \"Authorization: Bearer %s\" http://%s/v1/emails\n", bearer, httpAddr)
	err := a.WaitForStore(ctx, time.Second, func(err error) {
		fmt.Fprintf(w, "waiting for %s: %v\n", a.StoreName(), err)
	})
	if err == nil {
		fmt.Fprintln(w, "mailsink is ready")
	}
}

// healthcheck asks the mailsink on this host (at MAILSINK_HTTP_ADDR's port)
// whether it is ready: GET /readyz must answer 200 within 3 seconds. It lets
// a container without a shell or curl be health-checked.
func healthcheck(stderr io.Writer) int {
	host, port, err := net.SplitHostPort(config.Value(os.Getenv, "MAILSINK_HTTP_ADDR"))
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

// worstMemory is the most the memory limit is set to (memlimit.Config.Max):
// 256 MiB for everything but large messages, plus three times the largest
// message for each large transfer (the message, the store's record of it,
// the store's write buffer), plus the read budget
// (MAILSINK_READ_BUDGET_BYTES), plus the store's bound when it is in memory
// (MAILSINK_MEMORY_MAX_BYTES).
func worstMemory(cfg *config.Config) int64 {
	limit := 256<<20 + int64(cfg.SMTP.MaxLargeTransfers)*3*cfg.MaxMessageBytes + cfg.Reads.Budget
	if cfg.Store.InMemory() && !cfg.Store.UsesRedis() {
		limit += cfg.Store.MemoryMaxBytes
	}
	return limit
}

// defaultGCPercent is the collector's GOGC unless the environment sets one.
// mailsink's live heap is small (about 10 MiB serving 1,000,000 emails), so
// with Go's 100 it collected every few megabytes allocated; a list request
// that arrived during a collection waited for it. With 400, list by
// recipient under an SMTP ingest of 1,000 msg/s answered its p99 in 1.14,
// 1.35, 1.42 and 1.33 ms against 3.28, 1.91, 1.52 and 1.71 ms
// (docs/benchmarks.md), for about 12 MiB more RSS; the memory limit
// (package memlimit) makes it collect sooner once the heap is large.
const defaultGCPercent = 400

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

// bound names the address a listener is bound to: as a URL with scheme
// (when not "") for one address, and as it is, "[::]:8025 (all
// interfaces)", for a listener on every interface, where no URL would be
// right for every client.
func bound(scheme string, addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		return addr.String() + " (all interfaces)"
	}
	return scheme + addr.String()
}

// readBuildInfo returns the build information Go records in the binary, or
// nil without it.
func readBuildInfo() *debug.BuildInfo {
	info, _ := debug.ReadBuildInfo()
	return info
}

// versionOf returns the version mailsink reports: the one stamped at build
// time; else the main module's version Go records (a release tag for
// `go install ...@v1.2.3`, a pseudo-version with the commit for `go build`
// in a git checkout); else the VCS revision (with -dirty for uncommitted
// changes); else "devel" (go run, which records neither).
func versionOf(stamped string, info *debug.BuildInfo) string {
	if stamped != "" {
		return stamped
	}
	if info == nil {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var revision, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if revision == "" {
		return "devel"
	}
	if len(revision) > 12 {
		revision = revision[:12]
	}
	if modified == "true" {
		revision += "-dirty"
	}
	return revision
}

// dialable returns addr as a client on this host would dial it: a listener
// on all interfaces is reached at 127.0.0.1.
func dialable(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return addr.String()
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(tcp.Port))
}
