package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/tools/internal/loadgen"
)

// reads runs the reads benchmark: each hostile message, stored at the
// default size limit, read through every endpoint on each store.
func reads(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mailsink-bench reads", flag.ContinueOnError)
	fs.SetOutput(stderr)
	defaults, err := config.Load(func(string) string { return "" }, os.ReadFile)
	if err != nil {
		return err
	}
	var (
		sf        serverFlags
		stores    = fs.String("stores", "embedded,redis", "comma-separated stores to run on")
		doc       = fs.String("doc", "", "Markdown file to write the results into (its reads section; the rest of the file is kept)")
		command   = fs.String("command", "", "how it was invoked, for the report (default: the command line)")
		timeout   = fs.Duration("timeout", 20*time.Minute, "give up after this long")
		shapes    = fs.String("shapes", "", "comma-separated messages to read (default: all)")
		endpoints = fs.String("endpoints", "", "comma-separated endpoint paths to read, as the report shows them (default: all)")
		pprof     = fs.Bool("pprof", false, "start the server with MAILSINK_PPROF_ADDR and print its address, to profile it during the run")
		o         = loadgen.DefaultReadsOptions(int(defaults.MaxMessageBytes))
	)
	sf.register(fs)
	fs.IntVar(&o.Size, "size", o.Size, "bytes of each message (the server's default MAILSINK_MAX_MESSAGE_BYTES)")
	fs.IntVar(&o.Concurrency, "concurrency", o.Concurrency, "requests of a batch, sent at once")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.Shapes, err = pick(o.Shapes, *shapes, func(s loadgen.HostileShape) string { return s.Name }); err != nil {
		return fmt.Errorf("-shapes: %w", err)
	}
	if o.Endpoints, err = pick(o.Endpoints, *endpoints, func(e loadgen.ReadEndpoint) string { return e.Path }); err != nil {
		return fmt.Errorf("-endpoints: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
	o.Log = logf
	rep := &loadgen.ReadsReport{Command: *command, Machine: loadgen.DescribeMachine(), Started: time.Now(), Options: o}
	if rep.Command == "" {
		rep.Command = "mailsink-bench reads " + strings.Join(args, " ")
	}
	bin, cleanup, err := sf.binaryPath(ctx, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	failures, redis, err := sf.eachStore(ctx, bin, *stores, *pprof, func(so *loadgen.ServerOptions) { so.OtherAccount = true }, logf, func(srv *loadgen.Server) error {
		res, err := loadgen.RunReads(ctx, srv.Target, o)
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
	md := rep.Markdown()
	if *doc != "" {
		if err := loadgen.WriteSection(*doc, "reads", md); err != nil {
			return err
		}
		logf("wrote the reads section of %s", *doc)
	} else {
		fmt.Fprint(stdout, md)
	}
	if len(rep.Failures) > 0 {
		return fmt.Errorf("%d failures: %s", len(rep.Failures), strings.Join(rep.Failures, "; "))
	}
	return nil
}

// pick returns the items whose names are in the comma-separated list, in
// the list's order, or all items when it is empty.
func pick[T any](all []T, list string, name func(T) string) ([]T, error) {
	if list == "" {
		return all, nil
	}
	var out []T
	for _, want := range strings.Split(list, ",") {
		i := slices.IndexFunc(all, func(t T) bool { return name(t) == strings.TrimSpace(want) })
		if i < 0 {
			return nil, fmt.Errorf("unknown %q", want)
		}
		out = append(out, all[i])
	}
	return out, nil
}
