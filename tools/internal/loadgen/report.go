package loadgen

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Machine describes where a run happened.
type Machine struct {
	NProc, CPUModel, Memory, GoVersion, LoadAvg, Redis string
}

// DescribeMachine reads nproc, free -h, /proc/cpuinfo, go version and
// /proc/loadavg (what else was running: the machine is shared).
func DescribeMachine() Machine {
	m := Machine{
		NProc:     commandOutput("nproc"),
		Memory:    commandOutput("free", "-h"),
		GoVersion: commandOutput("go", "version"),
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.TrimSpace(string(b))
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	return m
}

func commandOutput(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return fmt.Sprintf("(%s: %v)", name, err)
	}
	return strings.TrimRight(string(out), "\n")
}

// Report is the Markdown of one suite run.
type Report struct {
	Title    string
	Command  string // the make target or command line that produced it
	Machine  Machine
	Results  []*Result
	Failures []string
	GoBench  string // output of go test -bench, when run
	Started  time.Time
	Elapsed  time.Duration
	Notes    []string
	// Suite is SuiteStandard or SuiteLarge: which targets it marks.
	Suite string
	// Scale is the -scale of the run (1 or 0: the standard set as it is).
	Scale float64
	// PeerBinary is the Inbucket binary the run was given ("" if none) and
	// PeerVersion what its -version printed.
	PeerBinary, PeerVersion string
	// Footprints are the per-email store measurements, Fsync the disk's
	// fsync ceiling (standard suite).
	Footprints []*Footprint
	Fsync      *FsyncResult
	FsyncLog   *FsyncResult // Fsync writing over zeros, as the embedded store's log does
	// Large is the large set's report when the same run went on to it
	// (suite -with-large, what `make bench` runs): the round 3 section marks
	// the targets of SuiteLarge from it.
	Large *Report
}

// Markdown renders the report.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n", r.Title)
	fmt.Fprintf(&b, "Run %s UTC, %s in all, with `%s`.\n\n", r.Started.UTC().Format("2006-01-02 15:04"), r.Elapsed.Round(time.Second), r.Command)
	fmt.Fprintf(&b, "Machine: %s CPUs (`nproc`), %s, %s; load average before the run: %s.\n\n",
		r.Machine.NProc, r.Machine.CPUModel, r.Machine.GoVersion, r.Machine.LoadAvg)
	fmt.Fprintf(&b, "```\n$ free -h\n%s\n```\n\n", r.Machine.Memory)
	if r.Machine.Redis != "" {
		fmt.Fprintf(&b, "Redis: %s.\n\n", r.Machine.Redis)
	}
	if r.PeerBinary != "" {
		fmt.Fprintf(&b, "Peer: Inbucket %s (`%s=%s`), memory store, started by the tool on free loopback ports in the same run.\n\n", r.PeerVersion, EnvInbucket, r.PeerBinary)
	} else if r.Suite == SuiteStandard {
		fmt.Fprintf(&b, "Peer: Inbucket not run (`%s` not set); the comparisons with it are not measured.\n\n", EnvInbucket)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "%s\n\n", n)
	}

	b.WriteString("| store | scenario | load | msg/s | p50 | p99 | server CPU per op (total / ops) | server RSS after (anon; peak VmHWM; anon peak sampled) | redis-server CPU (all clients) | load tool CPU | machine busy (stolen) |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|\n")
	for _, res := range r.Results {
		var load, rate, p50, p99 string
		switch {
		case res.Query != nil:
			q := res.Query
			req := "`GET /v1/emails?recipient=X&limit=25`"
			if res.Backend == PeerInbucket {
				req = "`GET /api/v1/mailbox/X` (the whole mailbox)"
			}
			load = fmt.Sprintf("%d × %s, %d client, %.1f emails per answer, %d emails in the store (%d recipients)",
				q.Requests, req, res.QueryConns, float64(q.Items)/float64(max(q.Requests, 1)), res.AccountEmails, res.Recipients)
			if in := res.Ingest; in != nil {
				load += fmt.Sprintf("; prefill over SMTP: %d messages × %d RCPTs in %s (%.0f emails/s)",
					in.Sent, res.PerMessage, in.Elapsed.Round(100*time.Millisecond), in.PerSecond()*float64(res.PerMessage))
			}
			if l := res.Load; l != nil {
				load += fmt.Sprintf("; **during an SMTP ingest** of 2 KB messages paced at %.0f msg/s over %d connections: %d stored (%.0f msg/s achieved), %d failed; the server CPU column counts both",
					res.LoadRate, res.LoadConns, l.Sent, l.PerSecond(), l.Failed)
			}
			rate = fmt.Sprintf("%.0f req/s", float64(q.Requests)/q.Elapsed.Seconds())
			p50, p99 = fmtDur(q.Latency.Percentile(50)), fmtDur(q.Latency.Percentile(99))
		case res.Ingest != nil:
			in := res.Ingest
			conn := "reused"
			if !res.Reuse {
				conn = "new per message"
			}
			if res.Pipeline {
				conn += ", pipelined"
			}
			if res.GoSMTP {
				conn += ", go-smtp's client"
			}
			load = fmt.Sprintf("%d × %d B (%s), %d connections, %s", res.Messages, res.MessageBytes, res.Shape, res.Connections, conn)
			if res.Verify != nil {
				load += fmt.Sprintf("; %d/%d found via API", res.Verify.Found, res.Verify.Expected)
			}
			if in.Failed > 0 {
				load += fmt.Sprintf("; %d failed", in.Failed)
			}
			rate = fmt.Sprintf("%.0f", in.PerSecond())
			p50, p99 = fmtDur(in.Latency.Percentile(50)), fmtDur(in.Latency.Percentile(99))
		}
		cpu, rss, rcpu := "-", "-", "-"
		if res.After.CPU > 0 {
			cpu = fmt.Sprintf("%s (%s / %d)", fmtDur(res.CPUPerOp()), res.ServerCPU().Round(10*time.Millisecond), opCount(res))
			rss = fmt.Sprintf("%s (%s; %s; %s)", MiB(res.After.RSS), MiB(res.After.RSSAnon), MiB(res.After.HWM), MiB(res.PeakAnon))
		}
		if res.RedisCPU > 0 {
			rcpu = res.RedisCPU.Round(10 * time.Millisecond).String()
			rcpu += fmt.Sprintf("; %d commands from all clients", res.RedisCommands)
			if res.RedisMemory > 0 {
				rcpu += fmt.Sprintf("; used_memory %s after", MiB(res.RedisMemory))
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f%% (%.0f%%) |\n", res.Backend, res.Name, load, rate, p50, p99, cpu, rss, rcpu,
			res.ToolCPU.Round(10*time.Millisecond), 100*res.MachineBusy, 100*res.MachineSteal)
	}
	b.WriteString("\n")
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "- FAILED: %s\n", f)
	}
	if len(r.Failures) > 0 {
		b.WriteString("\n")
	}

	if len(r.Footprints) > 0 || r.Fsync != nil {
		b.WriteString("Storage per email, each store on a mailsink of its own (`footprint-2k`: 2 KB plain messages, one recipient each, 8 reused connections; " +
			"Redis: `used_memory` from `INFO memory` right before and right after the ingest, and the sum of `MEMORY USAGE key SAMPLES 0` over the server's key prefix; " +
			"embedded: mailsink stopped, every file of the data directory added up, and again without Pebble's log files, which it keeps for reuse, up to ten memtables' worth or more after large messages):\n\n")
		b.WriteString("| store | emails × raw bytes | measure | per email |\n|---|---|---|---:|\n")
		for _, f := range r.Footprints {
			if f.Emails == 0 {
				continue
			}
			if f.Backend == "redis" {
				fmt.Fprintf(&b, "| redis | %d × %d B | used_memory %d -> %d B | %.0f B |\n", f.Emails, f.RawBytes, f.UsedBefore, f.UsedAfter, f.PerEmail())
				fmt.Fprintf(&b, "| redis | %d × %d B | MEMORY USAGE of %d keys: %d B | %.0f B |\n", f.Emails, f.RawBytes, f.Keys, f.KeyBytes, float64(f.KeyBytes)/float64(f.Emails))
			} else {
				fmt.Fprintf(&b, "| embedded | %d × %d B | data directory when stopped: %d B | %.0f B |\n", f.Emails, f.RawBytes, f.DirBefore, float64(f.DirBefore)/float64(f.Emails))
				fmt.Fprintf(&b, "| embedded | %d × %d B | without the log files (%d B): %d B, %d B allocated on disk (du) | %.0f B (allocated: %.0f B) |\n",
					f.Emails, f.RawBytes, f.Logs, f.DirAfter, f.DiskAfter, f.PerEmail(), float64(f.DiskAfter)/float64(f.Emails))
			}
		}
		if r.Fsync != nil {
			fmt.Fprintf(&b, "\nDisk: %s, the system's temporary directory, where the embedded store's data directories are made. One writer appending 4 KiB and calling fdatasync in a loop.\n", r.Fsync.Summary())
		}
		if r.FsyncLog != nil {
			fmt.Fprintf(&b, "\nThe same writing 4 KiB over a zero-filled file, as Pebble's log does once it reuses its files: %s. The store answers `250` only after its log write's fdatasync, so its log writes per second are at most this (concurrent messages share one).\n", r.FsyncLog.Summary())
		}
		b.WriteString("\n")
	}

	if c := r.ceilings(); c != "" {
		b.WriteString(c)
	}

	b.WriteString("The targets of this run (issue 17):\n\n| target | verdict | evidence |\n|---|---|---|\n")
	for _, t := range Goals() {
		if t.Suite != r.Suite {
			continue
		}
		v, ev := t.Check(r)
		fmt.Fprintf(&b, "| %s | %s | %s |\n", t.Text, v, ev)
	}
	if r.Suite == SuiteLarge {
		b.WriteString(r.round3Large())
	}
	b.WriteString("\nEach scenario alone (the suite runs them in this order on one server per store; a list scenario's prefill tops the account up to its size, so it also holds the emails of the scenarios before it):\n\n```sh\n")
	seen := map[string]bool{}
	for _, res := range r.Results {
		cmd := res.Scenario.Command(res.Backend)
		if !seen[cmd] {
			seen[cmd] = true
			b.WriteString(cmd + "\n")
		}
	}
	b.WriteString("```\n")
	if r.GoBench != "" {
		fmt.Fprintf(&b, "\nGo micro-benchmarks (`go test -run '^$' -bench . -benchmem ./...`):\n\n```\n%s\n```\n", benchLines(r.GoBench))
	}
	return b.String()
}

// ceilings is the table of what the CPUs allow each ingest row: the CPU
// per message of the server, redis-server and the load tool added up, and
// the messages per second the machine's CPUs would carry at that cost.
func (r *Report) ceilings() string {
	cpus, _ := strconv.Atoi(strings.TrimSpace(r.Machine.NProc))
	var b strings.Builder
	for _, res := range r.Results {
		if res.Ingest == nil || res.Query != nil || res.Ingest.Sent == 0 || res.After.CPU == 0 {
			continue
		}
		if b.Len() == 0 {
			fmt.Fprintf(&b, "CPU per message and the ceiling it sets (%d CPUs shared by the server, Redis and the load tool: %d s of CPU per second over the total per message):\n\n", cpus, cpus)
			b.WriteString("| store | scenario | server | redis-server | load tool | total | ceiling | measured |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
		}
		n := time.Duration(res.Ingest.Sent)
		server, redis, tool := res.ServerCPU()/n, res.RedisCPU/n, res.ToolCPU/n
		total := server + redis + tool
		ceiling := "-"
		if cpus > 0 && total > 0 {
			ceiling = fmt.Sprintf("%.0f msg/s", float64(cpus)*float64(time.Second)/float64(total))
		}
		redisCol := "-"
		if redis > 0 {
			redisCol = fmtDur(redis)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %.0f msg/s |\n", res.Backend, res.Name, fmtDur(server), redisCol, fmtDur(tool), fmtDur(total), ceiling, res.Ingest.PerSecond())
	}
	if b.Len() > 0 {
		b.WriteString("\nredis-server's CPU is every client's (the run must have Redis to itself); the load tool's is its own getrusage over the phase. The server's and redis-server's count the work the messages left behind as well (search's digests of new mail): the phase ends when the server has gone idle after the last message (under 2% of a CPU over 1 s), while msg/s is over the sending alone.\n\n")
	}
	return b.String()
}

func opCount(r *Result) int {
	if r.Query != nil {
		return r.Query.Requests
	}
	return r.Ingest.Sent
}

// benchLines keeps the benchmark, package and failure lines of go test
// output.
func benchLines(out string) string {
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "Benchmark"), strings.HasPrefix(line, "pkg:"),
			strings.HasPrefix(line, "cpu:"), strings.HasPrefix(line, "FAIL"),
			strings.HasPrefix(line, "--- FAIL"), strings.HasPrefix(line, "ok "),
			strings.Contains(line, "bench_test.go"):
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

// WriteSection replaces the text between the markers
// "<!-- BEGIN name -->" and "<!-- END name -->" in the file at path with
// content, appending the markers when the file lacks them. The rest of the
// file, the hand-written analysis, is kept.
func WriteSection(path, name, content string) error {
	begin, end := "<!-- BEGIN "+name+" -->", "<!-- END "+name+" -->"
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	block := begin + "\n" + strings.TrimRight(content, "\n") + "\n" + end
	var out []byte
	i, j := bytes.Index(old, []byte(begin)), bytes.Index(old, []byte(end))
	if i >= 0 && j > i {
		out = append(out, old[:i]...)
		out = append(out, block...)
		out = append(out, old[j+len(end):]...)
	} else {
		out = append(out, old...)
		if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n\n")) {
			out = append(out, '\n')
		}
		out = append(out, block+"\n"...)
	}
	return os.WriteFile(path, out, 0o644)
}
