package loadgen

import (
	"fmt"
	"time"
)

// Suites a target belongs to.
const (
	SuiteStandard = "standard"
	SuiteLarge    = "large"
)

// Verdicts of a target.
const (
	Met         = "**met**"
	NotMet      = "**not met**"
	NotMeasured = "not measured"
	// NoPeer is the verdict of a comparison with Inbucket when the suite
	// was not given its binary.
	NoPeer = "not measured (set " + EnvInbucket + ", see docs)"
)

// Goal is one of the performance targets of issue 17, checked against a
// report's figures.
type Goal struct {
	Text  string
	Suite string
	// Check returns the verdict (Met, NotMet, NotMeasured, NoPeer) and the
	// figures it rests on.
	Check func(r *Report) (verdict, evidence string)
}

// Goals returns the targets `make bench` (SuiteStandard) and
// `make bench-large` (SuiteLarge) mark.
func Goals() []Goal {
	var ts []Goal
	rows := []struct{ name, text string }{
		{Ingest2KReuse, "2 KB over 8 reused connections"},
		{Ingest2KNewConn, "2 KB, new connection per message"},
		{Ingest100K, "100 KB with a base64 attachment"},
	}
	for _, row := range rows {
		ts = append(ts,
			Goal{Text: row.text + ", Redis: >= 1.1 × Inbucket's msg/s", Suite: SuiteStandard, Check: versusPeer(row.name, "redis", 1.1)},
			Goal{Text: row.text + ", embedded (durable): >= 0.8 × Inbucket's msg/s", Suite: SuiteStandard, Check: versusPeer(row.name, "embedded", 0.8)})
	}
	ts = append(ts,
		Goal{Text: "fsync ceiling of the disk under the embedded store's data directory: measured and stated", Suite: SuiteStandard, Check: fsyncStated},
		Goal{Text: "CPU per 2 KB message, mailsink + redis-server together: <= 100 µs", Suite: SuiteStandard, Check: cpuPerMessage("redis")},
		Goal{Text: "CPU per 2 KB message, mailsink on the embedded store: <= 100 µs", Suite: SuiteStandard, Check: cpuPerMessage("embedded")},
		Goal{Text: "Redis memory per email <= its raw size + 2 KB", Suite: SuiteStandard, Check: footprintAtMost("redis", 2048)},
		Goal{Text: "embedded store's files per email (without the log files Pebble keeps for reuse) <= its raw size + 1 KB", Suite: SuiteStandard, Check: footprintAtMost("embedded", 1024)},
		Goal{Text: "100 concurrent 25 MB messages (Redis): mailsink peak RSS <= 1 GiB", Suite: SuiteStandard, Check: memoryAtMost("redis")},
		Goal{Text: "100 concurrent 25 MB messages (embedded): mailsink peak anonymous RSS <= 1 GiB", Suite: SuiteStandard, Check: memoryAtMost("embedded")},
	)
	for _, b := range []string{"redis", "embedded"} {
		ts = append(ts,
			Goal{Text: "list by recipient p99 <= 1 ms, 1,000,000 emails in one account, >= 10,000 lookups, idle (" + b + ")", Suite: SuiteLarge, Check: p99AtMost(List1M, b, time.Millisecond, 10_000)},
			Goal{Text: "list by recipient p99 <= 1 ms, 1,000,000 emails in one account, >= 10,000 lookups, under ingest load (" + b + ")", Suite: SuiteLarge, Check: p99AtMost(List1MLoad, b, time.Millisecond, 10_000)})
	}
	ts = append(ts, Goal{Text: "mailsink RSS <= 100 MB with 1,000,000 emails in Redis", Suite: SuiteLarge, Check: func(r *Report) (string, string) {
		res := find(r.Results, List1M, "redis")
		if res == nil || res.After.RSS == 0 {
			return NotMeasured, "no " + List1M + " run on redis"
		}
		ev := fmt.Sprintf("VmRSS %s (peak %s) after %d emails and the lookups", MiB(res.After.RSS), MiB(res.After.HWM), res.AccountEmails)
		if res.AccountEmails < 1_000_000 {
			return NotMeasured, ev + " (fewer than 1,000,000 emails)"
		}
		return verdict(res.After.RSS <= 100<<20), ev
	}})
	return ts
}

func find(rs []*Result, name, backend string) *Result {
	for _, r := range rs {
		if r.Name == name && (backend == "" || r.Backend == backend) {
			return r
		}
	}
	return nil
}

func verdict(ok bool) string {
	if ok {
		return Met
	}
	return NotMet
}

// versusPeer compares a row's msg/s on backend with Inbucket's in the same
// run: met when mailsink's is at least factor times Inbucket's.
func versusPeer(name, backend string, factor float64) func(*Report) (string, string) {
	return func(r *Report) (string, string) {
		ours := find(r.Results, name, backend)
		peer := find(r.Results, name, PeerInbucket)
		var ev string
		if ours != nil && ours.Ingest != nil {
			ev = fmt.Sprintf("mailsink %s %.0f msg/s", backend, ours.Ingest.PerSecond())
		}
		if peer == nil || peer.Ingest == nil {
			if r.PeerBinary == "" {
				return NoPeer, ev
			}
			return NotMeasured, ev + "; no Inbucket " + name + " result (see the failures above)"
		}
		if ours == nil || ours.Ingest == nil {
			return NotMeasured, "no " + name + " run on " + backend
		}
		got, want := ours.Ingest.PerSecond(), factor*peer.Ingest.PerSecond()
		return verdict(got >= want), fmt.Sprintf("%s, Inbucket %.0f msg/s: %.2f × (needs %.0f)", ev, peer.Ingest.PerSecond(), got/peer.Ingest.PerSecond(), want)
	}
}

func fsyncStated(r *Report) (string, string) {
	if r.Fsync == nil || r.Fsync.Writes == 0 {
		return NotMeasured, "the fsync probe did not run"
	}
	if r.FsyncLog != nil {
		return Met, r.Fsync.Summary() + "; " + r.FsyncLog.Summary()
	}
	return Met, r.Fsync.Summary()
}

// cpuPerMessage checks the 2 KB reused-connection row: on Redis mailsink's
// and redis-server's CPU added up (redis-server's from INFO cpu: every
// client's, so the run must have Redis to itself), on the embedded store
// mailsink's.
func cpuPerMessage(backend string) func(*Report) (string, string) {
	return func(r *Report) (string, string) {
		res := find(r.Results, Ingest2KReuse, backend)
		if res == nil || res.After.CPU == 0 || res.Ingest == nil || res.Ingest.Sent == 0 {
			return NotMeasured, "no " + Ingest2KReuse + " run on " + backend
		}
		n := time.Duration(res.Ingest.Sent)
		total := res.ServerCPU() + res.RedisCPU
		ev := fmt.Sprintf("%s on %s: mailsink %s", Ingest2KReuse, backend, fmtDur(res.ServerCPU()/n))
		if backend == "redis" {
			ev += fmt.Sprintf(" + redis-server %s = %s", fmtDur(res.RedisCPU/n), fmtDur(total/n))
		}
		ev += fmt.Sprintf(" per message (%s / %d)", total.Round(10*time.Millisecond), res.Ingest.Sent)
		if p := find(r.Results, Ingest2KReuse, PeerInbucket); p != nil && p.After.CPU > 0 && p.Ingest != nil && p.Ingest.Sent > 0 {
			ev += fmt.Sprintf("; Inbucket %s", fmtDur(p.CPUPerOp()))
		}
		return verdict(total/n <= 100*time.Microsecond), ev
	}
}

// footprintAtMost checks the store's bytes per email of the footprint
// measurement against the raw size plus slack.
func footprintAtMost(backend string, slack int) func(*Report) (string, string) {
	return func(r *Report) (string, string) {
		var f *Footprint
		for _, x := range r.Footprints {
			if x.Backend == backend && x.Emails > 0 {
				f = x
			}
		}
		if f == nil {
			return NotMeasured, "no footprint run on " + backend
		}
		got, want := f.PerEmail(), float64(f.RawBytes+slack)
		var ev string
		if backend == "redis" {
			ev = fmt.Sprintf("used_memory grew %d B for %d emails of %d B: %.0f B per email (raw + %.0f B); MEMORY USAGE of the %d keys: %.0f B per email",
				f.UsedAfter-f.UsedBefore, f.Emails, f.RawBytes, got, got-float64(f.RawBytes), f.Keys, float64(f.KeyBytes)/float64(f.Emails))
		} else {
			ev = fmt.Sprintf("%d emails of %d B: data directory %d B when stopped, %d B without Pebble's log files (%d B): %.0f B per email (raw %+.0f B); allocated on disk %.0f B per email",
				f.Emails, f.RawBytes, f.DirBefore, f.DirAfter, f.Logs, got, got-float64(f.RawBytes), float64(f.DiskAfter)/float64(f.Emails))
		}
		return verdict(got <= want), ev
	}
}

func p99AtMost(name, backend string, want time.Duration, lookups int) func(*Report) (string, string) {
	return func(r *Report) (string, string) {
		res := find(r.Results, name, backend)
		if res == nil || res.Query == nil {
			return NotMeasured, "no " + name + " run on " + backend
		}
		got := res.Query.Latency.Percentile(99)
		ev := fmt.Sprintf("%s on %s: p99 %s (p50 %s) over %d lookups at %d emails", name, backend, fmtDur(got), fmtDur(res.Query.Latency.Percentile(50)), res.Query.Requests, res.AccountEmails)
		if l := res.Load; l != nil {
			ev += fmt.Sprintf("; ingest during them: %.0f msg/s achieved (%d stored, paced at %.0f msg/s over %d connections)", l.PerSecond(), l.Sent, res.LoadRate, res.LoadConns)
		}
		if res.Query.Requests < lookups || res.AccountEmails < 1_000_000 {
			return NotMeasured, ev + fmt.Sprintf(" (fewer than %d lookups or 1,000,000 emails)", lookups)
		}
		return verdict(got <= want), ev
	}
}

// memoryAtMost checks the server's memory at its peak during the 25 MB
// scenario: VmHWM on Redis (the process's own memory), the sampled RssAnon
// peak on the embedded store, whose VmHWM also counts the pages of the
// memory-mapped store file it wrote (file-backed, reclaimable).
func memoryAtMost(backend string) func(*Report) (string, string) {
	return func(r *Report) (string, string) {
		res := find(r.Results, Ingest25M, backend)
		if res == nil || res.After.HWM == 0 {
			return NotMeasured, "no " + Ingest25M + " run on " + backend
		}
		got := res.After.HWM
		if backend == "embedded" {
			got = res.PeakAnon
		}
		return verdict(got <= 1<<30), fmt.Sprintf("%s on %s: VmHWM %s, sampled RssAnon peak %s, %d of %d messages of %d bytes stored",
			Ingest25M, backend, MiB(res.After.HWM), MiB(res.PeakAnon), res.Ingest.Sent, res.Messages, res.MessageBytes)
	}
}
