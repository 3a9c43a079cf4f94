package loadgen

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Round3Goals returns the targets of issue 38 ("Performance, round 3").
// `make bench` marks them all in the "round3" section of docs/benchmarks.md:
// those of SuiteLarge from the large set it runs after the standard one
// (suite -with-large); a standard run without it has them "not measured",
// with evidence that says how to measure them.
func Round3Goals() []Goal {
	std := func(text string, check func(*Report) (string, string)) Goal {
		return Goal{Text: text, Suite: SuiteStandard, Check: check}
	}
	gs := []Goal{
		std("Redis: redis-server CPU per 2 KB create <= 40 µs", redisCPUPerCreate(40*time.Microsecond)),
		std("Redis: mailsink's own CPU per 2 KB message <= its CPU on the embedded store", ownCPURedisVsEmbedded),
		std("2 KB over 8 reused connections, Redis: >= 0.85 × Inbucket's msg/s", versusPeer(Ingest2KReuse, "redis", 0.85)),
		std("2 KB, new connection per message, Redis: >= 1.0 × Inbucket's msg/s", versusPeer(Ingest2KNewConn, "redis", 1.0)),
		std("embedded (Pebble): CPU per 2 KB message <= 1.1 × Inbucket's", cpuVersusPeer(Ingest2KReuse, "embedded", 1.1)),
		std("2 KB over 8 reused connections, embedded: >= 0.9 × Inbucket's msg/s", versusPeer(Ingest2KReuse, "embedded", 0.9)),
		std("2 KB, new connection per message, embedded: >= 1.0 × Inbucket's msg/s", versusPeer(Ingest2KNewConn, "embedded", 1.0)),
		std("100 KB with a base64 attachment, embedded: >= 1.2 × Inbucket's msg/s", versusPeer(Ingest100K, "embedded", 1.2)),
		std("2 KB over 8 reused connections, `:memory:`: >= 1.0 × Inbucket's msg/s", versusPeer(Ingest2KReuse, "memory", 1.0)),
		std("2 KB, new connection per message, `:memory:`: >= 1.0 × Inbucket's msg/s", versusPeer(Ingest2KNewConn, "memory", 1.0)),
		std("100 KB with a base64 attachment, `:memory:`: >= 1.0 × Inbucket's msg/s", versusPeer(Ingest100K, "memory", 1.0)),
	}
	for _, b := range []string{"embedded", "redis", "memory"} {
		gs = append(gs, std("list by recipient ("+b+"): server CPU per request <= Inbucket's, at 16k and 100k emails", listCPUVersusPeer(b)))
	}
	gs = append(gs,
		std("list by recipient p99 <= Inbucket's at 16k emails (embedded)", listP99VersusPeer(List16K, "embedded")),
		std("list by recipient p99 <= Inbucket's at 100k emails (embedded)", listP99VersusPeer(List100K, "embedded")),
		std("list by recipient p99 <= 1 ms on Redis, at 16k and 100k emails", listP99Redis(time.Millisecond)),
	)
	for _, b := range []string{"embedded", "redis"} {
		gs = append(gs, Goal{Text: "1,000,000 emails in one account under 1,000 msg/s of ingest (" + b + "): >= 99% of list requests within 1 ms server-side (le=\"0.001\")",
			Suite: SuiteLarge, Check: serverShareWithin(List1MLoad, b, 0.99)})
	}
	for _, b := range []string{"embedded", "redis"} {
		gs = append(gs, std("mailsink RSS <= 100 MiB after the three ingest rows, default settings ("+b+")", rssAfterIngest(b, 100<<20)))
	}
	gs = append(gs,
		std("the first round's memory targets (100 concurrent 25 MB messages, <= 1 GiB) still met", roundOneMemory),
		std("no message lost or duplicated in any scenario", noneLost),
	)
	return gs
}

// perMessage returns the row's CPU figures per stored message, and false
// when the row did not run with the server's CPU known.
func perMessage(r *Report, name, backend string) (res *Result, server, redis time.Duration, ok bool) {
	res = find(r.Results, name, backend)
	if res == nil || res.After.CPU == 0 || res.Ingest == nil || res.Ingest.Sent == 0 {
		return res, 0, 0, false
	}
	n := time.Duration(res.Ingest.Sent)
	return res, res.ServerCPU() / n, res.RedisCPU / n, true
}

func redisCPUPerCreate(want time.Duration) func(*Report) (string, string) {
	return func(r *Report) (string, string) {
		res, _, redis, ok := perMessage(r, Ingest2KReuse, "redis")
		if !ok || res.RedisCPU == 0 {
			return NotMeasured, "no " + Ingest2KReuse + " run on redis with redis-server's CPU"
		}
		ev := fmt.Sprintf("%s on redis: redis-server %s per message (%s / %d, INFO cpu, every client's; %d commands, %.1f per message)",
			Ingest2KReuse, fmtDur(redis), res.RedisCPU.Round(10*time.Millisecond), res.Ingest.Sent, res.RedisCommands, float64(res.RedisCommands)/float64(res.Ingest.Sent))
		if t := CommandStatsText(res.RedisCmds, res.Ingest.Sent); t != "" {
			ev += "; " + t
		}
		return verdict(redis <= want), ev
	}
}

func ownCPURedisVsEmbedded(r *Report) (string, string) {
	_, onRedis, _, ok1 := perMessage(r, Ingest2KReuse, "redis")
	_, onEmbedded, _, ok2 := perMessage(r, Ingest2KReuse, "embedded")
	if !ok1 || !ok2 {
		return NotMeasured, "needs " + Ingest2KReuse + " on both redis and embedded"
	}
	return verdict(onRedis <= onEmbedded), fmt.Sprintf("%s: mailsink %s per message on redis, %s on embedded (%.2f ×)",
		Ingest2KReuse, fmtDur(onRedis), fmtDur(onEmbedded), float64(onRedis)/float64(onEmbedded))
}

// cpuVersusPeer compares the server CPU per message of a row with
// Inbucket's: met when mailsink's is at most factor times Inbucket's.
func cpuVersusPeer(name, backend string, factor float64) func(*Report) (string, string) {
	return func(r *Report) (string, string) {
		_, ours, _, ok := perMessage(r, name, backend)
		if !ok {
			return NotMeasured, "no " + name + " run on " + backend
		}
		ev := fmt.Sprintf("%s: mailsink %s %s per message", name, backend, fmtDur(ours))
		_, peer, _, pok := perMessage(r, name, PeerInbucket)
		if !pok {
			if r.PeerBinary == "" {
				return NoPeer, ev
			}
			return NotMeasured, ev + "; no Inbucket " + name + " result"
		}
		return verdict(float64(ours) <= factor*float64(peer)), fmt.Sprintf("%s, Inbucket %s: %.2f ×", ev, fmtDur(peer), float64(ours)/float64(peer))
	}
}

// listCPUVersusPeer compares the server CPU per list request at 16k and
// 100k emails with Inbucket's at the same sizes: met when both are at
// most Inbucket's.
func listCPUVersusPeer(backend string) func(*Report) (string, string) {
	return func(r *Report) (string, string) {
		var evs []string
		v := Met
		for _, name := range []string{List16K, List100K} {
			ours, peer := find(r.Results, name, backend), find(r.Results, name, PeerInbucket)
			if ours == nil || ours.Query == nil || ours.After.CPU == 0 {
				return NotMeasured, strings.Join(append(evs, "no "+name+" run on "+backend), "; ")
			}
			ev := fmt.Sprintf("%s: mailsink %s per request", name, fmtDur(ours.CPUPerOp()))
			if peer == nil || peer.Query == nil || peer.After.CPU == 0 {
				evs = append(evs, ev)
				if v == NotMet {
					continue
				} else if r.PeerBinary == "" {
					v = NoPeer
				} else if v != NoPeer {
					v = NotMeasured
				}
				continue
			}
			evs = append(evs, fmt.Sprintf("%s, Inbucket %s (%.2f ×)", ev, fmtDur(peer.CPUPerOp()), float64(ours.CPUPerOp())/float64(peer.CPUPerOp())))
			if ours.CPUPerOp() > peer.CPUPerOp() {
				v = NotMet // a miss stands whatever the other row says
			}
		}
		return v, strings.Join(evs, "; ")
	}
}

func listP99VersusPeer(name, backend string) func(*Report) (string, string) {
	return func(r *Report) (string, string) {
		ours, peer := find(r.Results, name, backend), find(r.Results, name, PeerInbucket)
		if ours == nil || ours.Query == nil || ours.Query.Requests == 0 {
			return NotMeasured, "no " + name + " run on " + backend
		}
		got := ours.Query.Latency.Percentile(99)
		ev := fmt.Sprintf("%s on %s: p99 %s (p50 %s) over %d requests", name, backend, fmtDur(got), fmtDur(ours.Query.Latency.Percentile(50)), ours.Query.Requests)
		if peer == nil || peer.Query == nil || peer.Query.Requests == 0 {
			if r.PeerBinary == "" {
				return NoPeer, ev
			}
			return NotMeasured, ev + "; no Inbucket " + name + " result"
		}
		want := peer.Query.Latency.Percentile(99)
		return verdict(got <= want), fmt.Sprintf("%s; Inbucket p99 %s (p50 %s)", ev, fmtDur(want), fmtDur(peer.Query.Latency.Percentile(50)))
	}
}

func listP99Redis(want time.Duration) func(*Report) (string, string) {
	return func(r *Report) (string, string) {
		var evs []string
		ok := true
		for _, name := range []string{List16K, List100K} {
			res := find(r.Results, name, "redis")
			if res == nil || res.Query == nil || res.Query.Requests == 0 {
				return NotMeasured, strings.Join(append(evs, "no "+name+" run on redis"), "; ")
			}
			got := res.Query.Latency.Percentile(99)
			ok = ok && got <= want
			evs = append(evs, fmt.Sprintf("%s: p99 %s (p50 %s) over %d requests", name, fmtDur(got), fmtDur(res.Query.Latency.Percentile(50)), res.Query.Requests))
		}
		return verdict(ok), strings.Join(evs, "; ")
	}
}

// serverShareWithin checks the share of the row's list requests mailsink's
// own request-duration histogram put within 1 ms, at 1,000,000 emails and
// at least 10,000 requests.
func serverShareWithin(name, backend string, want float64) func(*Report) (string, string) {
	return func(r *Report) (string, string) {
		res := find(r.Results, name, backend)
		if res == nil || res.Query == nil || res.ListServer == nil || res.ListServer.Total == 0 {
			return NotMeasured, "no " + name + " run on " + backend + " in this run (`make bench` and `make bench-large` run it, with the server's histogram read before and after)"
		}
		h := res.ListServer
		share := float64(h.Fast) / float64(h.Total)
		ev := fmt.Sprintf("%s on %s: %d of %d list requests within 1 ms server-side (%.2f%%; client p99 %s) at %d emails",
			name, backend, h.Fast, h.Total, 100*share, fmtDur(res.Query.Latency.Percentile(99)), res.AccountEmails)
		if l := res.Load; l != nil {
			ev += fmt.Sprintf("; ingest during them: %.0f msg/s achieved", l.PerSecond())
		}
		if res.Query.Requests < 10_000 || res.AccountEmails < 1_000_000 {
			return NotMeasured, ev + " (fewer than 10000 requests or 1,000,000 emails)"
		}
		// A lighter load than asked makes the lists' target easier: the
		// verdict needs the ingest at its rate, without failures.
		if l := res.Load; l == nil || l.Failed > 0 || (res.LoadRate > 0 && l.PerSecond() < 0.95*res.LoadRate) {
			return NotMeasured, ev + " (the ingest under the lists did not run at its rate without failures)"
		}
		return verdict(share >= want), ev
	}
}

// rssAfterIngest checks the server's RSS right after the last of the three
// ingest rows the targets compare (ingest-100k-attachment, which runs after
// the 2 KB rows).
func rssAfterIngest(backend string, want int64) func(*Report) (string, string) {
	return func(r *Report) (string, string) {
		res := find(r.Results, Ingest100K, backend)
		if res == nil || res.After.RSS == 0 {
			return NotMeasured, "no " + Ingest100K + " run on " + backend
		}
		return verdict(res.After.RSS <= want), fmt.Sprintf("after %s on %s: VmRSS %s (anon %s; peak VmHWM %s)",
			Ingest100K, backend, MiB(res.After.RSS), MiB(res.After.RSSAnon), MiB(res.After.HWM))
	}
}

func roundOneMemory(r *Report) (string, string) {
	var evs []string
	v := Met
	for _, b := range []string{"redis", "embedded"} {
		got, ev := memoryAtMost(b)(r)
		evs = append(evs, ev)
		switch {
		case got == NotMet:
			v = NotMet
		case got != Met && v == Met:
			v = got
		}
	}
	return v, strings.Join(evs, "; ")
}

// noneLost is met when every verified scenario found each of its emails
// once and no scenario failed, those of the large set included when the run
// went on to it.
func noneLost(r *Report) (string, string) {
	reports := []*Report{r}
	if r.Large != nil {
		reports = append(reports, r.Large)
	}
	verified, emails := 0, 0
	var bad, failures []string
	for _, rep := range reports {
		for _, res := range rep.Results {
			if v := res.Verify; v != nil {
				verified++
				emails += v.Expected
				if !v.OK() {
					bad = append(bad, fmt.Sprintf("%s on %s: %d missing, %d duplicates, %d unexpected", res.Name, res.Backend, v.Missing, v.Duplicates, v.Unexpected))
				}
			}
		}
		failures = append(failures, rep.Failures...)
	}
	if verified == 0 {
		return NotMeasured, "no scenario was verified"
	}
	ev := fmt.Sprintf("%d scenarios verified through the API, %d emails each found once", verified, emails)
	for _, f := range failures {
		if len(f) > 200 {
			f = f[:200] + "..."
		}
		bad = append(bad, "failed: "+f)
	}
	if len(bad) > 0 {
		return NotMet, strings.Join(bad, "; ")
	}
	return Met, ev
}

// Round3Markdown renders the targets of issue 38 for the "round3" section:
// the verdicts, what the CPUs allow each ingest row, and the profiles and
// Redis command statistics of the run.
func (r *Report) Round3Markdown() string {
	var b strings.Builder
	b.WriteString("### Round 3 (issue 38)\n\n")
	fmt.Fprintf(&b, "Run %s UTC with `%s`, the same run as the standard section below (its table has every row's figures; the machine is described there).",
		r.Started.UTC().Format("2006-01-02 15:04"), r.Command)
	if r.Large != nil {
		fmt.Fprintf(&b, " The targets at 1,000,000 emails come from the large set the same run went on to at %s UTC (the large section below).",
			r.Large.Started.UTC().Format("15:04"))
	}
	if r.Scale != 1 && r.Scale != 0 {
		fmt.Fprintf(&b, " **Scaled by %g** (`-scale`): message counts, store sizes and requests are that fraction of the standard set's.", r.Scale)
	}
	if r.PeerBinary != "" {
		fmt.Fprintf(&b, " Peer: Inbucket %s, memory store, in the same run.", r.PeerVersion)
	}
	b.WriteString(" `:memory:` is mailsink with `MAILSINK_DATA_DIR=:memory:`. The crash and fault tests are Go tests, not part of this run.\n\n")
	b.WriteString("| target | verdict | evidence |\n|---|---|---|\n")
	for _, g := range Round3Goals() {
		v, ev := r.checkRound3(g)
		fmt.Fprintf(&b, "| %s | %s | %s |\n", g.Text, v, ev)
	}
	b.WriteString("\n")
	if c := r.ceilings(); c != "" {
		b.WriteString("What the machine allows: ")
		b.WriteString(c)
	}
	results := r.Results
	if r.Large != nil {
		results = append(slices.Clip(results), r.Large.Results...) // the rows at 1,000,000 emails
	}
	var profiled []*Result
	for _, res := range results {
		if res.Profile != "" || res.Heap != "" || (len(res.RedisCmds) > 0 && res.Ingest != nil && res.Query == nil) {
			profiled = append(profiled, res)
		}
	}
	if len(profiled) > 0 {
		b.WriteString("Where the time goes: the server's CPU profile of the first seconds of each row (`go tool pprof -top -cum`: the 30 functions most time passes through), and on Redis the row's `INFO commandstats`:\n\n")
		for _, res := range profiled {
			fmt.Fprintf(&b, "%s on %s:\n\n", res.Name, res.Backend)
			if len(res.RedisCmds) > 0 && res.Query == nil && res.Ingest != nil && res.Ingest.Sent > 0 {
				fmt.Fprintf(&b, "- %s\n\n", CommandStatsText(res.RedisCmds, res.Ingest.Sent))
			}
			if res.Profile != "" {
				fmt.Fprintf(&b, "```\n%s\n```\n\n", strings.TrimRight(res.Profile, "\n"))
			}
			if res.Heap != "" {
				fmt.Fprintf(&b, "Live heap right after the row (`/debug/pprof/heap?gc=1`, `go tool pprof -top -cum -sample_index=inuse_space`):\n\n```\n%s\n```\n\n", strings.TrimRight(res.Heap, "\n"))
			}
		}
	}
	return b.String()
}

// checkRound3 marks g: from the large set of the run when g is one of its
// targets and the run went on to it (Large), else from r.
func (r *Report) checkRound3(g Goal) (string, string) {
	if g.Suite == SuiteLarge && r.Suite == SuiteStandard && r.Large != nil {
		return g.Check(r.Large)
	}
	v, ev := g.Check(r)
	if g.Suite != r.Suite && v == NotMeasured && r.Suite == SuiteStandard {
		ev += "; to measure: `make bench`, or `make bench-large` for the large set alone, whose section marks it"
	}
	return v, ev
}

// round3Large is the table of the issue 38 targets the large run marks.
func (r *Report) round3Large() string {
	var b strings.Builder
	b.WriteString("\nThe targets of issue 38 this run marks:\n\n| target | verdict | evidence |\n|---|---|---|\n")
	for _, g := range Round3Goals() {
		if g.Suite == SuiteLarge {
			v, ev := g.Check(r)
			fmt.Fprintf(&b, "| %s | %s | %s |\n", g.Text, v, ev)
		}
	}
	return b.String()
}
