// Command mailsink-bench is mailsink's load tool. It drives SMTP ingest and
// the list API of a mailsink, confirms through the API that every message
// was stored, and prints messages per second, latency percentiles, and the
// server's CPU time and RSS (from /proc, when it knows the server's PID).
//
//	mailsink-bench [flags]          run one scenario (see -h)
//	mailsink-bench suite [flags]    run the standard set on each store and
//	                                write the results into docs/benchmarks.md
//	mailsink-bench reads [flags]    store hostile messages and read each through
//	                                every endpoint, eight requests at once, on
//	                                each store (docs/benchmarks.md)
//	mailsink-bench search [flags]   send a varied corpus of 100,000 emails to
//	                                one account on each store and time search
//	                                queries, new mail's indexing and a restart
//	                                (docs/benchmarks.md)
//
// It starts mailsink itself (built once from ./cmd/mailsink, on free
// loopback ports, with the embedded store in a temporary directory or with
// Redis under a key prefix of its own that it deletes afterwards), unless
// -smtp names a running one.
//
// With -peer inbucket -peer-bin PATH it drives Inbucket instead, started on
// free loopback ports with its memory store; the suite runs Inbucket's rows
// in the same run when -peer-bin or MAILSINK_BENCH_INBUCKET names its
// binary, and marks issue 17's targets (docs/benchmarks.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mailsink/mailsink/tools/internal/loadgen"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case len(args) > 0 && args[0] == "suite":
		err = suite(ctx, args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "reads":
		err = reads(ctx, args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "search":
		err = search(ctx, args[1:], stdout, stderr)
	default:
		err = single(ctx, args, stdout, stderr)
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "mailsink-bench:", err)
		return 1
	}
	return 0
}

// serverFlags are the flags that say which mailsink (or peer) to drive.
type serverFlags struct {
	root, binary, redisURL, serverLog string
	peer, peerBin                     string
}

func (f *serverFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.root, "root", ".", "the mailsink module to build ./cmd/mailsink from")
	fs.StringVar(&f.binary, "bin", "", "a mailsink binary to run instead of building one")
	fs.StringVar(&f.redisURL, "redis-url", "redis://127.0.0.1:6379/0", "Redis for -store redis (keys go under a fresh prefix and are deleted afterwards)")
	fs.StringVar(&f.serverLog, "server-log", "", "file for the started server's stderr (default: discarded)")
	fs.StringVar(&f.peerBin, "peer-bin", os.Getenv(loadgen.EnvInbucket), "the peer's binary (Inbucket; default $"+loadgen.EnvInbucket+"; docs/benchmarks.md says how to build it)")
}

// logWriter opens -server-log, or returns nil.
func (f *serverFlags) logWriter() (io.Writer, error) {
	if f.serverLog == "" {
		return nil, nil
	}
	return os.OpenFile(f.serverLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// startPeer starts the peer (-peer-bin) on free loopback ports.
func (f *serverFlags) startPeer(ctx context.Context) (*loadgen.Server, error) {
	lw, err := f.logWriter()
	if err != nil {
		return nil, err
	}
	return loadgen.StartPeer(ctx, loadgen.PeerOptions{Name: loadgen.PeerInbucket, Binary: f.peerBin, Log: lw})
}

// binaryPath builds mailsink once into a temporary directory, unless -bin
// names one; the returned function removes what it built.
func (f *serverFlags) binaryPath(ctx context.Context, stderr io.Writer) (string, func(), error) {
	if f.binary != "" {
		return f.binary, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "mailsink-bench-bin-")
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintln(stderr, "building ./cmd/mailsink")
	bin, err := loadgen.Build(ctx, f.root, dir)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

func (f *serverFlags) start(ctx context.Context, bin, backend string, pprof bool) (*loadgen.Server, error) {
	o, err := f.options(bin, backend, pprof)
	if err != nil {
		return nil, err
	}
	return loadgen.StartServer(ctx, o)
}

// eachStore starts mailsink on each of stores (a comma-separated list of
// backends) in turn, with adjust's changes to its options, calls run with
// it and stops it. A store that fails to start, run or stop is a line of
// the returned failures, and the next one goes on; redis is the version of
// the Redis the stores used, if any.
func (f *serverFlags) eachStore(ctx context.Context, bin, stores string, pprof bool, adjust func(*loadgen.ServerOptions),
	logf func(string, ...any), run func(*loadgen.Server) error) (failures []string, redis string, err error) {
	for _, backend := range strings.Split(stores, ",") {
		backend = strings.TrimSpace(backend)
		so, err := f.options(bin, backend, pprof)
		if err != nil {
			return failures, redis, err
		}
		if adjust != nil {
			adjust(&so)
		}
		srv, err := loadgen.StartServer(ctx, so)
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s: start mailsink: %v", backend, err))
			continue
		}
		logf("started mailsink (pid %d, %s store): SMTP %s, HTTP %s, pprof %s", srv.PID, backend, srv.SMTP, srv.HTTP, srv.PProf)
		if info, err := srv.RedisInfo(ctx, "server"); err == nil && info != nil {
			redis = fmt.Sprintf("redis_version %s at %s on the same machine", info["redis_version"], f.redisURL)
		}
		if err := run(srv); err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", backend, err))
		}
		logf("stopping mailsink (%s) and deleting its data", backend)
		if err := srv.Stop(); err != nil {
			failures = append(failures, fmt.Sprintf("%s: stop: %v", backend, err))
		}
	}
	return failures, redis, nil
}

func (f *serverFlags) options(bin, backend string, pprof bool) (loadgen.ServerOptions, error) {
	o := loadgen.ServerOptions{Binary: bin, PProf: pprof}
	switch backend {
	case "embedded":
	case "memory":
		o.Memory = true
	case "redis":
		o.RedisURL = f.redisURL
	default:
		return o, fmt.Errorf("-store %q: want embedded, memory or redis", backend)
	}
	lw, err := f.logWriter()
	o.Log = lw
	return o, err
}

func single(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mailsink-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		sf      serverFlags
		backend = fs.String("store", "embedded", "store of the mailsink it starts: embedded, memory (MAILSINK_DATA_DIR=:memory:) or redis")
		smtp    = fs.String("smtp", "", "SMTP host:port of a running mailsink (then none is started; needs -http and -key)")
		httpURL = fs.String("http", "", "base URL of the running mailsink's HTTP listener")
		key     = fs.String("key", "", "API key of the running mailsink's account the mail lands in")
		pid     = fs.Int("pid", 0, "process id of the running mailsink, to read its CPU time and RSS from /proc")
		pprof   = fs.String("pprof", "", "base URL of the running mailsink's MAILSINK_PPROF_ADDR listener (for -cpuprofile)")
		timeout = fs.Duration("timeout", 10*time.Minute, "give up after this long")
		s       loadgen.Scenario
	)
	sf.register(fs)
	fs.StringVar(&s.Kind, "mode", "ingest", "ingest: send messages and confirm they are stored; list: prefill, then time list requests")
	fs.IntVar(&s.Messages, "messages", 20_000, "messages to send (ingest)")
	fs.IntVar(&s.Connections, "conns", 8, "concurrent SMTP clients")
	fs.BoolVar(&s.Reuse, "reuse", true, "send each client's messages over one connection; false: a new connection per message")
	fs.BoolVar(&s.Pipeline, "pipeline", false, "pipeline MAIL, RCPT and DATA in one write (RFC 2920)")
	fs.BoolVar(&s.GoSMTP, "gosmtp", false, "send with go-smtp's client (one command at a time, byte-by-byte dot-stuffing) instead of the tool's own")
	fs.IntVar(&s.Size, "size", 2048, "approximate message size in bytes")
	fs.StringVar(&s.Shape, "shape", loadgen.ShapePlain, "plain (text/plain) or attachment (multipart with a base64 attachment)")
	fs.IntVar(&s.Recipients, "recipients", 100, "distinct recipients the messages cycle through")
	fs.IntVar(&s.PerMessage, "rcpts-per-msg", 1, "RCPTs per message: each is one stored email")
	fs.BoolVar(&s.Verify, "verify", true, "page through the API afterwards to confirm every email is stored once")
	fs.IntVar(&s.AccountSize, "account-size", 100_000, "emails in the account when the list requests run (list)")
	fs.IntVar(&s.MailboxSize, "mailbox-size", 0, "list: spread the prefill over recipients of this many emails each (then -recipients is ignored; 0: use -recipients)")
	fs.IntVar(&s.Queries, "queries", 5_000, "list requests (list)")
	fs.IntVar(&s.QueryConns, "query-conns", 1, "concurrent list clients (list)")
	fs.StringVar(&s.CPUProfile, "cpuprofile", "", "write a 5s CPU profile of the server during the timed phase to this file (starts the server with MAILSINK_PPROF_ADDR)")
	fs.IntVar(&s.LoadConns, "load-conns", 0, "list: run an SMTP ingest of 2 KB messages over this many connections during the requests")
	fs.Float64Var(&s.LoadRate, "load-rate", 1000, "list with -load-conns: messages per second of that ingest in all (0: flat out)")
	fs.StringVar(&sf.peer, "peer", "", "run against this peer instead of mailsink: inbucket (started from -peer-bin with its memory store)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if s.Kind == "list" {
		s.Verify = false
	}
	s.Name = s.Kind
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	var (
		t   loadgen.Target
		srv *loadgen.Server
	)
	switch {
	case sf.peer != "":
		if sf.peer != loadgen.PeerInbucket {
			return fmt.Errorf("-peer %q: want %s", sf.peer, loadgen.PeerInbucket)
		}
		var err error
		if srv, err = sf.startPeer(ctx); err != nil {
			return err
		}
		defer srv.Stop()
		t = srv.Target
		fmt.Fprintf(stderr, "started %s (pid %d): SMTP %s, HTTP %s\n", sf.peer, t.PID, t.SMTP, t.HTTP)
	case *smtp != "":
		if *httpURL == "" || *key == "" {
			return errors.New("-smtp needs -http and -key")
		}
		t = loadgen.Target{SMTP: *smtp, HTTP: *httpURL, APIKey: *key, PID: *pid, PProf: *pprof, Backend: "external"}
	default:
		bin, cleanup, err := sf.binaryPath(ctx, stderr)
		if err != nil {
			return err
		}
		defer cleanup()
		if srv, err = sf.start(ctx, bin, *backend, s.CPUProfile != ""); err != nil {
			return err
		}
		defer func() {
			if err := srv.Stop(); err != nil {
				fmt.Fprintln(stderr, "mailsink-bench: stopping mailsink:", err)
			}
		}()
		t = srv.Target
		fmt.Fprintf(stderr, "started mailsink (pid %d, %s store): SMTP %s, HTTP %s\n", t.PID, t.Backend, t.SMTP, t.HTTP)
	}
	r := loadgen.NewRunner(t, srv, stderr)
	res, err := r.Run(ctx, s)
	if res != nil && (res.Ingest != nil || res.Query != nil) {
		fmt.Fprintf(stdout, "%s %s: %s\n", t.Backend, s.Name, res.Summary())
		if res.Ingest != nil && res.Query == nil {
			if cs := loadgen.CommandStatsText(res.RedisCmds, res.Ingest.Sent); cs != "" {
				fmt.Fprintln(stdout, cs)
			}
		}
	}
	return err
}

func suite(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mailsink-bench suite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		sr        = suiteRun{stdout: stdout, stderr: stderr}
		large     = fs.Bool("large", false, "run the large set (1,000,000 emails) instead of the standard one")
		withLarge = fs.Bool("with-large", false, "run the large set after the standard one, so that the round 3 section marks every target (-stores and -skip apply to the standard set)")
		stores    = fs.String("stores", "", "comma-separated stores to run on (default: embedded,redis,memory; with -large embedded,redis)")
		doc       = fs.String("doc", "", "Markdown file to write the results into (between markers; the rest of the file is kept)")
		gobench   = fs.String("gobench", "", "file with the output of go test -bench, to include in the report")
		timeout   = fs.Duration("timeout", 15*time.Minute, "give up after this long")
	)
	fs.StringVar(&sr.skip, "skip", "", "comma-separated scenarios to leave out (a partial run: its targets are marked not measured)")
	fs.BoolVar(&sr.profile, "profile", true, "take a 2s CPU profile of the server in the 2 KB reused-connection and list rows and put its top in the round 3 section")
	fs.StringVar(&sr.command, "command", "", "how the suite was invoked, for the report (default: the command line)")
	fs.Float64Var(&sr.scale, "scale", 1, "multiply every scenario's messages, store size and requests by this (a short trial; a report of a scaled run says so)")
	fs.IntVar(&sr.footprint, "footprint", 10_000, "2 KB messages stored on a mailsink of their own per store, to measure storage per email (standard set; 0: skip)")
	sr.sf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *large && *withLarge {
		return errors.New("-large and -with-large: choose one")
	}
	if sr.command == "" {
		sr.command = "mailsink-bench suite " + strings.Join(args, " ")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	bin, cleanup, err := sr.sf.binaryPath(ctx, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	sr.bin = bin

	rep, err := sr.run(ctx, *large, *stores)
	if err != nil {
		return err
	}
	if *gobench != "" {
		out, err := os.ReadFile(*gobench)
		if err != nil {
			return err
		}
		rep.GoBench = string(out)
	}
	// Each set's section is written as it ends, so that a large set that
	// fails to run leaves the standard one written.
	write := func(section, md string) error {
		if *doc == "" {
			_, err := fmt.Fprint(stdout, md)
			return err
		}
		if err := loadgen.WriteSection(*doc, section, md); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote the %s section of %s\n", section, *doc)
		return nil
	}
	round3 := func() error {
		if *doc == "" {
			return write("round3", "\n"+rep.Round3Markdown())
		}
		return write("round3", rep.Round3Markdown())
	}
	if err := write(rep.Suite, rep.Markdown()); err != nil { // the doc's sections are named after the sets
		return err
	}
	if *doc != "" && rep.Suite == loadgen.SuiteStandard {
		if err := round3(); err != nil {
			return err
		}
	}
	failures := rep.Failures
	if *withLarge {
		sr.skip = ""
		if rep.Large, err = sr.run(ctx, true, ""); err != nil {
			return err
		}
		if err := write(rep.Large.Suite, rep.Large.Markdown()); err != nil {
			return err
		}
		failures = append(failures, rep.Large.Failures...)
	}
	if rep.Suite == loadgen.SuiteStandard && (*doc == "" || *withLarge) {
		// Again with the large set's targets, or once on stdout.
		if err := round3(); err != nil {
			return err
		}
	}
	if len(failures) > 0 {
		return fmt.Errorf("%d failures: %s", len(failures), strings.Join(failures, "; "))
	}
	return nil
}

// suiteRun is what each set of a suite run shares: the server's flags, the
// binary and the suite's own flags.
type suiteRun struct {
	sf             serverFlags
	bin            string
	skip, command  string
	profile        bool
	scale          float64
	footprint      int
	stdout, stderr io.Writer
}

// run runs the standard set, or the large one, on each of the
// comma-separated stores ("": the set's default stores) and returns its
// report; an error is one that leaves no report.
func (sr *suiteRun) run(ctx context.Context, large bool, stores string) (*loadgen.Report, error) {
	scenarios, title, which := loadgen.Standard(), "Standard run (`make bench`)", loadgen.SuiteStandard
	if large {
		scenarios, title, which = loadgen.Large(), "Large run (`make bench-large`)", loadgen.SuiteLarge
	}
	scenarios = loadgen.Scale(without(scenarios, sr.skip), sr.scale)
	if stores == "" {
		stores = "embedded,redis,memory"
		if large {
			stores = "embedded,redis"
		}
	}
	rep := &loadgen.Report{Title: title, Command: sr.command, Machine: loadgen.DescribeMachine(), Started: time.Now(), Suite: which, Scale: sr.scale}
	if sr.skip != "" {
		rep.Notes = append(rep.Notes, fmt.Sprintf("**A partial run** (`-skip %s`).", sr.skip))
	}
	if sr.scale != 1 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("**A trial run scaled by %g** (`-scale`): message counts, store sizes and requests are that fraction of the standard set's.", sr.scale))
	}
	logf := func(format string, args ...any) { fmt.Fprintf(sr.stderr, format+"\n", args...) }
	sf, stdout, stderr := &sr.sf, sr.stdout, sr.stderr

	if !large {
		if err := fsyncProbe(ctx, rep, logf); err != nil {
			rep.Failures = append(rep.Failures, "fsync probe: "+err.Error())
		}
	}
	if sf.peerBin != "" && !large {
		rep.PeerBinary = sf.peerBin
		if out, err := exec.CommandContext(ctx, sf.peerBin, "-version").Output(); err == nil {
			rep.PeerVersion = strings.TrimSpace(string(out))
		}
		runPeer(ctx, sf, loadgen.Scale(loadgen.Peer(), sr.scale), rep, stdout, stderr)
	}
	for _, backend := range strings.Split(stores, ",") {
		backend = strings.TrimSpace(backend)
		if err := ctx.Err(); err != nil {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s: not run: %v", backend, err))
			continue
		}
		if !large && sr.footprint > 0 && backend != "memory" {
			o, err := sf.options(sr.bin, backend, false)
			if err == nil {
				var f *loadgen.Footprint
				f, err = loadgen.MeasureFootprint(ctx, o, loadgen.FootprintScenario(sr.footprint), logf)
				if f != nil {
					rep.Footprints = append(rep.Footprints, f)
				}
			}
			if err != nil {
				rep.Failures = append(rep.Failures, fmt.Sprintf("%s footprint: %v", backend, err))
			}
		}
		srv, err := sf.start(ctx, sr.bin, backend, sr.profile)
		if err != nil {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s: start mailsink: %v", backend, err))
			continue
		}
		fmt.Fprintf(stderr, "started mailsink (pid %d, %s store): SMTP %s, HTTP %s\n", srv.PID, backend, srv.SMTP, srv.HTTP)
		if backend == "redis" {
			if info, err := srv.RedisInfo(ctx, "server"); err == nil {
				p, _ := srv.RedisInfo(ctx, "persistence")
				rep.Machine.Redis = fmt.Sprintf("redis_version %s at %s on the same machine, aof_enabled=%s",
					info["redis_version"], sf.redisURL, p["aof_enabled"])
			}
		}
		run := scenarios
		if backend == "memory" {
			// The memory store holds the mail of the rows before in its
			// bound (MAILSINK_MEMORY_MAX_BYTES, 1 GiB): no room for 100
			// messages of 25 MB, and round 1's memory targets are about
			// the other stores.
			run = without(run, loadgen.Ingest25M)
		}
		var profDir string
		if sr.profile {
			if profDir, err = os.MkdirTemp("", "mailsink-bench-prof-"); err != nil {
				return nil, err
			}
			run = withProfiles(run, profDir, backend)
		}
		first := len(rep.Results)
		runAll(ctx, srv, run, rep, stdout, stderr)
		if profDir != "" {
			for _, res := range rep.Results[first:] {
				if res.CPUProfile != "" {
					res.Profile = pprofTop(ctx, sr.bin, res.CPUProfile)
					res.CPUProfile = ""
				}
				if res.HeapProfile != "" {
					res.Heap = pprofTop(ctx, sr.bin, res.HeapProfile, "-sample_index=inuse_space")
					res.HeapProfile = ""
				}
			}
			os.RemoveAll(profDir)
		}
		fmt.Fprintf(stderr, "stopping mailsink (%s) and deleting its data\n", backend)
		if err := srv.Stop(); err != nil {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s: stop: %v", backend, err))
		}
	}
	rep.Elapsed = time.Since(rep.Started)
	rep.Notes = append(rep.Notes, "The load tool runs on the same 2 CPUs as the server (and Redis), and the machine is shared with other "+
		"work, so the figures are lower bounds of what the server does alone; the load average above shows how busy it was.")
	return rep, nil
}

// runAll runs the scenarios in order on srv, adding results and failures to
// rep; the first failure ends the server's run.
func runAll(ctx context.Context, srv *loadgen.Server, scenarios []loadgen.Scenario, rep *loadgen.Report, stdout, stderr io.Writer) {
	r := loadgen.NewRunner(srv.Target, srv, stderr)
	for _, s := range scenarios {
		res, err := r.Run(ctx, s)
		if res != nil && (res.Ingest != nil || res.Query != nil) {
			rep.Results = append(rep.Results, res)
			fmt.Fprintf(stdout, "%s %s: %s\n", srv.Backend, s.Name, res.Summary())
		}
		if err != nil {
			msg := fmt.Sprintf("%s %s: %v", srv.Backend, s.Name, err)
			fmt.Fprintln(stderr, "mailsink-bench:", msg)
			rep.Failures = append(rep.Failures, msg)
			return
		}
	}
}

// runPeer starts the peer, runs its scenarios and stops it.
func runPeer(ctx context.Context, sf *serverFlags, scenarios []loadgen.Scenario, rep *loadgen.Report, stdout, stderr io.Writer) {
	srv, err := sf.startPeer(ctx)
	if err != nil {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%s: start: %v", loadgen.PeerInbucket, err))
		return
	}
	fmt.Fprintf(stderr, "started %s %s (pid %d): SMTP %s, HTTP %s\n", loadgen.PeerInbucket, rep.PeerVersion, srv.PID, srv.SMTP, srv.HTTP)
	runAll(ctx, srv, scenarios, rep, stdout, stderr)
	if err := srv.Stop(); err != nil {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%s: stop: %v", loadgen.PeerInbucket, err))
	}
}

// fsyncProbe measures the fsync ceiling of the disk the embedded store's
// data directories are made on (the system's temporary directory).
func fsyncProbe(ctx context.Context, rep *loadgen.Report, logf func(string, ...any)) error {
	dir, err := os.MkdirTemp("", "mailsink-bench-fsync-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, overwrite := range []bool{false, true} {
		res, err := loadgen.MeasureFsync(ctx, dir, 2000, 4096, 3*time.Second, overwrite)
		if err != nil {
			return err
		}
		res.Path = os.TempDir()
		if overwrite {
			rep.FsyncLog = res
		} else {
			rep.Fsync = res
		}
		logf("fsync ceiling: %s", res.Summary())
	}
	return nil
}

// withProfiles returns the scenarios with a 2s CPU profile of the server,
// written into dir, in the rows whose cost round 3 is about: 2 KB over
// reused connections and the list rows. Profiling at pprof's 100 Hz costs
// the server about 1% of its CPU.
func withProfiles(scenarios []loadgen.Scenario, dir, backend string) []loadgen.Scenario {
	out := append([]loadgen.Scenario(nil), scenarios...)
	for i, s := range out {
		switch s.Name {
		case loadgen.Ingest2KReuse, loadgen.List16K, loadgen.List100K, loadgen.List1M, loadgen.List1MLoad:
			out[i].CPUProfile = filepath.Join(dir, backend+"-"+s.Name+".pprof")
			out[i].ProfileSeconds = 2
		case loadgen.Ingest100K:
			// What is live after the three ingest rows (the RSS target).
			out[i].HeapProfile = filepath.Join(dir, backend+"-"+s.Name+".heap")
		}
	}
	return out
}

// pprofTop returns the first lines of `go tool pprof -top -cum` (the
// callers the time goes through, not only the syscalls it ends in) of a profile of
// bin, or why there are none.
func pprofTop(ctx context.Context, bin, profile string, flags ...string) string {
	args := append(append([]string{"tool", "pprof", "-top", "-cum", "-nodecount=30"}, flags...), bin, profile)
	out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(go tool pprof: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	var keep []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "File:") || strings.HasPrefix(line, "Build ID:") || strings.HasPrefix(line, "Type:") || strings.HasPrefix(line, "Time:") {
			continue
		}
		keep = append(keep, line)
	}
	return strings.TrimSpace(strings.Join(keep, "\n"))
}

// without returns the scenarios whose names are not in the comma-separated
// list names.
func without(scenarios []loadgen.Scenario, names string) []loadgen.Scenario {
	drop := map[string]bool{}
	for _, n := range strings.Split(names, ",") {
		drop[strings.TrimSpace(n)] = true
	}
	var out []loadgen.Scenario
	for _, s := range scenarios {
		if !drop[s.Name] {
			out = append(out, s)
		}
	}
	return out
}
