package loadgen

import (
	"fmt"
	"strings"
	"time"
)

// The targets of the reads benchmark (the hardening issue).
const (
	ReadCPUTarget  = 2 * time.Second
	ReadRSSTarget  = 1 << 30
	OtherP99Target = 50 * time.Millisecond
)

// ReadsReport is the Markdown of a reads benchmark on each store.
type ReadsReport struct {
	Command   string
	Machine   Machine
	LoadAfter string // /proc/loadavg after the run
	Started   time.Time
	Elapsed   time.Duration
	Options   ReadsOptions
	Results   []*ReadsResult
	Failures  []string
}

// Markdown renders the report.
func (r *ReadsReport) Markdown() string {
	var b strings.Builder
	o := r.Options
	b.WriteString("### Reads of hostile messages (`make bench-reads`)\n\n")
	fmt.Fprintf(&b, "Run %s UTC, %s in all, with `%s`.\n\n", r.Started.UTC().Format("2006-01-02 15:04"), r.Elapsed.Round(time.Second), r.Command)
	fmt.Fprintf(&b, "Machine: %s CPUs (`nproc`), %s, %s; load average before the run: %s; after: %s. "+
		"The machine is shared with other engineers' builds and tests, and the load tool runs on the same CPUs as the server "+
		"(and Redis): the CPU and wall times below are what the server got on a busy machine.\n\n",
		r.Machine.NProc, r.Machine.CPUModel, r.Machine.GoVersion, r.Machine.LoadAvg, r.LoadAfter)
	if r.Machine.Redis != "" {
		fmt.Fprintf(&b, "Redis: %s.\n\n", r.Machine.Redis)
	}

	b.WriteString("**Method.** The tool builds `./cmd/mailsink` and starts `mailsink serve` on free loopback ports with its defaults " +
		"(the memory limit and GOGC that `serve` sets, `MAILSINK_READ_BUDGET_BYTES` 256 MiB of which an account may hold half, " +
		"`MAILSINK_READ_WAIT` 5s, `MAILSINK_MAX_MESSAGE_BYTES` 26214400) and an accounts file of two accounts; " +
		"on the embedded store in a temporary directory, then on Redis under a key prefix of its own. ")
	fmt.Fprintf(&b, "For each message below and each endpoint it stores a copy of its own over SMTP (AUTH with the first account's key; "+
		"the bytes as they are), so that no batch finds another's parse in the server's cache; then sends %d requests for it at once, "+
		"each on its own connection, reads every answer to its end, and deletes the copy. ", o.Concurrency)
	fmt.Fprintf(&b, "**CPU**: the server's utime+stime from `/proc/PID/stat` (10 ms ticks) right before the batch and right after its last answer; "+
		"*per request* is that divided by the %d requests less those answered 503 (refused for the read budget after waiting, at next to no cost); "+
		"the requests of a batch share one parse, so one request's own cost is not observable from outside, and the batch's total bounds it. It includes the other account's list requests and the server's "+
		"background work, which cost it the baseline below per second of the batch's wall time. ", o.Concurrency)
	b.WriteString("**Peak RSS**: `VmHWM` from `/proc/PID/status` after the batch, ")
	if len(r.Results) > 0 && !r.Results[0].HWMReset {
		b.WriteString("which could not be reset (`/proc/PID/clear_refs`): the peak of the server's life so far; ")
	} else {
		b.WriteString("reset to the current RSS before the batch by writing 5 to `/proc/PID/clear_refs`: the batch's peak, " +
			"or the RSS the batch started with when that was higher; ")
	}
	b.WriteString("on the embedded store it counts the pages of the memory-mapped store file the server touched. *Anon peak*: the largest `RssAnon` " +
		"(heap and stacks) sampled every 20 ms during the batch. ")
	fmt.Fprintf(&b, "**The other account**: %d emails created through the API over %d recipients; throughout the run one client lists one "+
		"recipient's emails (`GET /v1/emails?recipient=X&limit=25`, X at random) every %s, timed from sending the request to having read "+
		"the answer; a row's p99 is over the requests begun during its batch.\n\n", r.otherEmails(), r.otherRecipients(), o.ListEvery)

	if len(r.Results) > 0 {
		b.WriteString("The attachment endpoints ask for the last attachment the parser lists, or for 0 when there is none " +
			"(a 404 after reading the whole message).\n\n")
		b.WriteString("| message | bytes | built as | holds | attachment asked for |\n|---|---:|---|---|---:|\n")
		for _, s := range r.Results[0].Shapes {
			fmt.Fprintf(&b, "| `%s` | %d | %s | %s | %d |\n", s.Name, s.Bytes, s.What, s.Count, s.Attachment)
		}
		b.WriteString("\n")
	}

	for _, res := range r.Results {
		fmt.Fprintf(&b, "**%s store**: %s for the reads. Before them, for %s with only the other account's client running, the server used %s of CPU "+
			"a second and that client's p99 was %s (%d requests). The machine was %.0f%% busy (%.0f%% stolen) over the reads; the load tool used %s "+
			"of CPU. Storing a copy over SMTP took %s (p50).\n\n",
			res.Backend, res.Elapsed.Round(time.Second), r.Options.Baseline, fmtDur(res.BaselineCPU), p99Text(res.Baseline), len(res.Baseline),
			100*res.MachineBusy, 100*res.MachineSteal, res.ToolCPU.Round(10*time.Millisecond), fmtDur(res.storeP50()))
		b.WriteString("| message | endpoint | answers | 200 answer | wall p50 / max | server CPU: batch | per request | peak RSS (VmHWM) | anon peak | other account's list p99 (requests) |\n")
		b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, bt := range res.Batches {
			size := "-"
			if bt.Status[200] > 0 {
				size = MiB(bt.Bytes)
				if bt.Bytes < 1<<20 {
					size = fmt.Sprintf("%d B", bt.Bytes)
				}
			}
			other := fmt.Sprintf("%s (%d)", p99Text(bt.Other), len(bt.Other))
			if bt.OtherErrors > 0 {
				other += fmt.Sprintf(", %d failed", bt.OtherErrors)
			}
			fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s | %s / %s | %s | %s | %s | %s | %s |\n", bt.Shape, bt.Endpoint, statusText(bt.Status), size,
				fmtDur(bt.Wall.Percentile(50)), fmtDur(bt.Wall.Max()), fmtDur(bt.CPU), fmtDur(bt.CPUPerRequest()), MiB(bt.HWM), MiB(bt.PeakAnon), other)
		}
		b.WriteString("\n")
		for _, bt := range res.Batches {
			for _, e := range uniq(bt.Errors) {
				fmt.Fprintf(&b, "- `%s` `%s`: %s\n", bt.Shape, bt.Endpoint, e)
			}
		}
	}
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "- FAILED: %s\n", f)
	}

	b.WriteString("\nThe targets of this run:\n\n| target | store | verdict | evidence |\n|---|---|---|---|\n")
	for _, res := range r.Results {
		for _, row := range res.verdicts() {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", row[0], res.Backend, row[1], row[2])
		}
	}
	b.WriteString("\nOne store alone: `go run ./tools/mailsink-bench reads -stores embedded` (or `redis`); `-shapes` and `-endpoints` pick rows.\n")
	return b.String()
}

func (r *ReadsReport) otherEmails() int {
	if len(r.Results) > 0 {
		return r.Results[0].OtherEmails
	}
	return r.Options.OtherEmails
}

func (r *ReadsReport) otherRecipients() int {
	if len(r.Results) > 0 {
		return r.Results[0].OtherRecipients
	}
	return r.Options.OtherRecipients
}

// verdicts returns the targets' rows for the result: target, verdict,
// evidence.
func (res *ReadsResult) verdicts() [][3]string {
	var worst, widest, highest *ReadBatch
	for _, bt := range res.Batches {
		if worst == nil || bt.CPUPerRequest() > worst.CPUPerRequest() {
			worst = bt
		}
		if widest == nil || bt.CPU > widest.CPU {
			widest = bt
		}
		if highest == nil || bt.HWM > highest.HWM {
			highest = bt
		}
	}
	if worst == nil {
		return nil
	}
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**not met**"
	}
	cpu := fmt.Sprintf("largest per request %s (`%s` `%s`, %s for the batch of %d)", fmtDur(worst.CPUPerRequest()), worst.Shape, worst.Endpoint,
		fmtDur(worst.CPU), len(worst.Wall))
	if widest.CPU <= ReadCPUTarget {
		cpu += fmt.Sprintf("; no batch used more than %s in all, so no request did", fmtDur(widest.CPU))
	} else {
		cpu += fmt.Sprintf("; the largest batch used %s in all (`%s` `%s`)", fmtDur(widest.CPU), widest.Shape, widest.Endpoint)
	}
	p99 := res.Other.Percentile(99)
	other := fmt.Sprintf("p99 %s over %d requests begun during the batches (max %s)", fmtDur(p99), len(res.Other), fmtDur(res.Other.Max()))
	if res.OtherErrors > 0 {
		other += fmt.Sprintf("; %d failed", res.OtherErrors)
	}
	return [][3]string{
		{"no request over 2 s of CPU", met(worst.CPUPerRequest() <= ReadCPUTarget), cpu},
		{"peak RSS under 1 GiB", met(highest.HWM < ReadRSSTarget), fmt.Sprintf("highest VmHWM %s (`%s` `%s`)", MiB(highest.HWM), highest.Shape, highest.Endpoint)},
		{"the other account's list p99 under 50 ms", met(p99 < OtherP99Target && res.OtherErrors == 0 && len(res.Other) > 0), other},
	}
}

// p99Text is the 99th percentile of l, or "-" when it is empty.
func p99Text(l Latencies) string {
	if len(l) == 0 {
		return "-"
	}
	return fmtDur(l.Percentile(99))
}

// storeP50 is the median time storing a copy took.
func (res *ReadsResult) storeP50() time.Duration {
	var all Latencies
	for _, s := range res.Shapes {
		all = append(all, s.Store...)
	}
	return all.Percentile(50)
}

// uniq returns the distinct strings of in, in order.
func uniq(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
