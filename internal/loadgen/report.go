package loadgen

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
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
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "%s\n\n", n)
	}

	b.WriteString("| store | scenario | load | msg/s | p50 | p99 | mailsink CPU per op (total / ops) | mailsink RSS after (anon; peak VmHWM; anon peak sampled) | redis-server CPU (all clients) | load tool CPU | machine busy (stolen) |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|\n")
	for _, res := range r.Results {
		var load, rate, p50, p99 string
		switch {
		case res.Query != nil:
			q := res.Query
			load = fmt.Sprintf("%d × `GET /v1/emails?recipient=X&limit=25`, %d client, %d emails in the account (%d recipients)",
				q.Requests, res.QueryConns, res.AccountEmails, res.Recipients)
			if in := res.Ingest; in != nil {
				load += fmt.Sprintf("; prefill over SMTP: %d messages × %d RCPTs in %s (%.0f emails/s)",
					in.Sent, res.PerMessage, in.Elapsed.Round(100*time.Millisecond), in.PerSecond()*float64(res.PerMessage))
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

	b.WriteString("The targets this run measures:\n\n| target | verdict | evidence |\n|---|---|---|\n")
	for _, t := range targets {
		if v, ev := t.check(r.Results); v != "not measured" {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", t.text, v, ev)
		}
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
