package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mailsink/mailsink/tools/internal/loadgen"
)

// search runs the search benchmark: a varied corpus sent to one account up
// to each step, the queries timed there, then how soon new mail is found
// and what a restart costs, on each store.
func search(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mailsink-bench search", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		sf         serverFlags
		stores     = fs.String("stores", "embedded,redis", "comma-separated stores to run on")
		doc        = fs.String("doc", "", "Markdown file to write the results into (its search section; the rest of the file is kept)")
		command    = fs.String("command", "", "how it was invoked, for the report (default: the command line)")
		timeout    = fs.Duration("timeout", 90*time.Minute, "give up after this long")
		steps      = fs.String("steps", "10000,30000,100000", "comma-separated sizes of the account, ascending, at which the queries are timed")
		profileDir = fs.String("profile-dir", "", "directory for the server's CPU profiles of the last step (default: a temporary one, printed)")
		o          = loadgen.DefaultSearchOptions()
	)
	sf.register(fs)
	fs.IntVar(&o.Requests, "requests", o.Requests, "requests per query category at the last step")
	fs.IntVar(&o.StepRequests, "step-requests", o.StepRequests, "requests per query category at the earlier steps")
	fs.IntVar(&o.Connections, "connections", o.Connections, "SMTP clients sending the corpus")
	fs.IntVar(&o.LagEmails, "lag-emails", o.LagEmails, "emails whose body word is searched for right after their 250")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.Steps = nil
	for _, s := range strings.Split(*steps, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || (len(o.Steps) > 0 && n <= o.Steps[len(o.Steps)-1]) {
			return fmt.Errorf("-steps: want ascending positive numbers, got %q", *steps)
		}
		o.Steps = append(o.Steps, n)
	}
	if o.ProfileDir = *profileDir; o.ProfileDir == "" {
		dir, err := os.MkdirTemp("", "mailsink-bench-search-")
		if err != nil {
			return err
		}
		o.ProfileDir = dir
	} else if err := os.MkdirAll(o.ProfileDir, 0o755); err != nil {
		return err // before ten minutes of sending, not after
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
	o.Log = logf
	logf("CPU profiles go to %s", o.ProfileDir)
	rep := &loadgen.SearchReport{Command: *command, Machine: loadgen.DescribeMachine(), Started: time.Now(), Options: o}
	if rep.Command == "" {
		rep.Command = "mailsink-bench search " + strings.Join(args, " ")
	}
	rep.Commit = gitCommit(sf.root)
	bin, cleanup, err := sf.binaryPath(ctx, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	failures, redis, err := sf.eachStore(ctx, bin, *stores, true, nil, logf, func(srv *loadgen.Server) error {
		res, err := loadgen.RunSearch(ctx, srv, o)
		if res != nil {
			rep.Results = append(rep.Results, res)
		}
		return err
	})
	if err != nil {
		return err
	}
	rep.Failures = append(rep.Failures, failures...)
	if redis != "" {
		rep.Machine.Redis = redis
	}
	rep.Elapsed = time.Since(rep.Started)
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		rep.LoadAfter = strings.TrimSpace(string(b))
	}
	if b, err := json.MarshalIndent(rep, "", " "); err == nil {
		// The figures as measured, to render again or to compare.
		file := filepath.Join(o.ProfileDir, "search-report.json")
		if err := os.WriteFile(file, b, 0o644); err == nil {
			logf("wrote %s", file)
		}
	}
	md := rep.Markdown()
	if *doc != "" {
		if err := loadgen.WriteSection(*doc, "search", md); err != nil {
			return err
		}
		logf("wrote the search section of %s", *doc)
	} else {
		fmt.Fprint(stdout, md)
	}
	if len(rep.Failures) > 0 {
		return fmt.Errorf("%d failures: %s", len(rep.Failures), strings.Join(rep.Failures, "; "))
	}
	return nil
}

// gitCommit returns the short commit of the module at root, with
// "+changes" when its work tree differs from it but in Markdown files.
func gitCommit(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "(unknown)"
	}
	commit := strings.TrimSpace(string(out))
	// Markdown is left out: the run rewrites docs/benchmarks.md itself.
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", ".", ":!*.md").Output(); err == nil && len(st) > 0 {
		commit += "+changes"
	}
	return commit
}
