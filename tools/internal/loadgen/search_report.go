package loadgen

import (
	"fmt"
	"strings"
	"time"
)

// The targets of the search issue, at 100,000 emails in one account.
const (
	SearchTargetEmails   = 100_000
	OperatorP99Target    = 50 * time.Millisecond
	BodyWordP99Target    = 500 * time.Millisecond
	CountUnreadP99Target = 5 * time.Millisecond
	BodyWordLagTarget    = time.Second
)

// SearchReport is the Markdown of a search benchmark on each store.
type SearchReport struct {
	Command   string
	Commit    string
	Machine   Machine
	LoadAfter string
	Started   time.Time
	Elapsed   time.Duration
	Options   SearchOptions
	Results   []*SearchResult
	Failures  []string
}

// Markdown renders the report.
func (r *SearchReport) Markdown() string {
	var b strings.Builder
	o := r.Options
	b.WriteString("### Search (`make bench-search`)\n\n")
	fmt.Fprintf(&b, "Run %s UTC at commit %s, %s in all, with `%s`.\n\n", r.Started.UTC().Format("2006-01-02 15:04"), r.Commit,
		r.Elapsed.Round(time.Second), r.Command)
	fmt.Fprintf(&b, "Machine: %s CPUs (`nproc`), %s, %s; load average before the run: %s; after: %s. "+
		"The machine is shared with other engineers' builds and tests, and the load tool and Redis run on the same CPUs as the server.\n\n",
		r.Machine.NProc, r.Machine.CPUModel, r.Machine.GoVersion, r.Machine.LoadAvg, r.LoadAfter)
	if r.Machine.Redis != "" {
		fmt.Fprintf(&b, "Redis: %s.\n\n", r.Machine.Redis)
	}
	fmt.Fprintf(&b, "The corpus: one account, messages sent over SMTP by %d pipelining clients; each message from one of %d senders "+
		"with display names, to one of %d recipients, with one of %d subjects, a body of 40-300 words drawn with Zipf frequencies "+
		"from %d words (%.0f%% of the messages also hold one of %d rare words), %.0f%% with a base64 attachment of 1-17 KB, "+
		"bodies 70%% as they are, 15%% quoted-printable, 15%% base64. Every 20th email is marked read, every 50th labelled "+
		"`invoice`, every 250th `vip`. Queries are sent one at a time on one keep-alive connection, picked at random in "+
		"their category, timed from sending to having read the whole answer; lists ask for `limit=25`.\n\n",
		o.Connections, len(senderLocals)*len(senderDomains), corpusRecipients, len(subjects), commonWords, 100*RareShare, rareWords,
		100*AttachmentShare)

	for _, res := range r.Results {
		r.writeResult(&b, res)
	}
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "- FAILED: %s\n", f)
	}

	b.WriteString("\nThe targets of issue 33 at 100,000 emails:\n\n| target | store | verdict | evidence |\n|---|---|---|---|\n")
	missed := map[*SearchResult]map[string]bool{}
	for _, res := range r.Results {
		for _, v := range res.Verdicts() {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", v.Target, res.Backend, verdictText(v.Met), v.Evidence)
			if !v.Met && v.Category != "" {
				if missed[res] == nil {
					missed[res] = map[string]bool{}
				}
				missed[res][v.Category] = true
				if isBodyCategory(v.Category) {
					missed[res][CatRareWord] = true // the body-word category profiled
				}
			}
		}
	}
	if len(missed) > 0 {
		b.WriteString("\nWhere a target is missed, CPU profiles of the server during the first 5 s of the category's queries " +
			"(`go tool pprof -top`) show where the time goes:\n\n")
		for _, res := range r.Results {
			for _, p := range res.QueryProfiles {
				if !missed[res][p.Category] {
					continue
				}
				fmt.Fprintf(&b, "%s store, %s (`%s`):\n\n```\n%s\n```\n\n", res.Backend, p.Category, p.File, trimTop(p.Top, 15))
			}
		}
	}
	b.WriteString("\nOne store alone: `go run ./tools/mailsink-bench search -stores embedded` (or `redis`); " +
		"`-steps 10000,30000,100000` sets the sizes, `-steps 10000,100000,1000000` (opt-in, not run here) measures a million.\n")
	return b.String()
}

func (r *SearchReport) writeResult(b *strings.Builder, res *SearchResult) {
	last := res.Last()
	if last == nil {
		fmt.Fprintf(b, "**%s store**: no step finished.\n\n", res.Backend)
		return
	}
	fmt.Fprintf(b, "**%s store** (%s for the run; the machine %.0f%% busy, %.0f%% stolen; the load tool used %s of CPU).\n\n",
		res.Backend, res.Elapsed.Round(time.Second), 100*res.MachineBusy, 100*res.MachineSteal, res.ToolCPU.Round(10*time.Millisecond))

	b.WriteString("Ingest and indexing, per step (each step adds emails to the account; *indexed* is when the step's last message " +
		"was found by a body word of its own, the digests being made in arrival order; server CPU from `/proc/PID/stat`):\n\n")
	b.WriteString("| emails | added | sent in | indexed in | server CPU while sending | until indexed | per email | RSS after (anon) |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range res.Steps {
		fmt.Fprintf(b, "| %d | %d | %s | %s | %s | %s | %s | %s (%s) |\n", s.Emails, s.Added, s.Ingest.Round(10*time.Millisecond),
			s.Indexed.Round(10*time.Millisecond), s.CPUIngest.Round(10*time.Millisecond), s.CPUAll.Round(10*time.Millisecond),
			fmtDur(s.CPUPerEmail()), MiB(s.After.RSS), MiB(s.After.RSSAnon))
	}
	b.WriteString("\n")
	if res.DigestShare > 0 {
		fmt.Fprintf(b, "Digest CPU: in a CPU profile of the server over the last step's sending and indexing (`%s`), the search "+
			"service's digest worker (`search.(*Service).digests`, cumulative) took %.0f%% of the samples: about %s of the %s per email.\n\n",
			res.DigestProfile, 100*res.DigestShare, fmtDur(time.Duration(res.DigestShare*float64(last.CPUPerEmail()))), fmtDur(last.CPUPerEmail()))
	}
	if res.DigestSamples > 0 {
		fmt.Fprintf(b, "Digest size: %.0f bytes per email on average (the stored value, JSON), over %d emails", res.DigestBytes, res.DigestSamples)
		if res.DigestKeyBytes > 0 {
			fmt.Fprintf(b, "; Redis `MEMORY USAGE` of an email's check results hash (the digest and the key) %.0f bytes", res.DigestKeyBytes)
		}
		if res.DataBytes > 0 {
			fmt.Fprintf(b, "; the store's directory held %s in all at the end (%d bytes per email, messages included)",
				MiB(res.DataBytes), res.DataBytes/int64(max(last.Emails+res.LagBackground+len(res.Lag), 1)))
		}
		b.WriteString(".\n\n")
	}

	b.WriteString("Queries, per step (p50 / p95 / p99, requests):\n\n| category | ")
	for _, s := range res.Steps {
		fmt.Fprintf(b, "%d emails | ", s.Emails)
	}
	b.WriteString("\n|---|")
	for range res.Steps {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, cat := range SearchCategories {
		fmt.Fprintf(b, "| %s | ", cat)
		for _, s := range res.Steps {
			if q := s.Categories[cat]; q != nil {
				fmt.Fprintf(b, "%s / %s / %s (%d) | ", fmtDur(q.Latency.Percentile(50)), fmtDur(q.Latency.Percentile(95)),
					fmtDur(q.Latency.Percentile(99)), len(q.Latency))
			} else {
				b.WriteString("- | ")
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "\nBy query kind at %d emails (matches: the items or count of the answers, per request):\n\n", last.Emails)
	b.WriteString("| category | kind | requests | p50 | p95 | p99 | max | matches |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range last.Kinds {
		fmt.Fprintf(b, "| %s | `%s` | %d | %s | %s | %s | %s | %.1f |\n", k.Category, k.Kind, len(k.Latency), fmtDur(k.Latency.Percentile(50)),
			fmtDur(k.Latency.Percentile(95)), fmtDur(k.Latency.Percentile(99)), fmtDur(k.Latency.Max()), float64(k.Matched)/float64(max(len(k.Latency), 1)))
	}
	b.WriteString("\n")

	fmt.Fprintf(b, "New mail: %d emails sent one at a time (a new connection each) while %d others arrived in the background; "+
		"from each 250 to the first answer listing it for its body word (polled every %s): p50 %s, max %s",
		len(res.Lag)+res.LagFailed, res.LagBackground, r.Options.Poll, fmtDur(res.Lag.Percentile(50)), fmtDur(res.Lag.Max()))
	if res.LagFailed > 0 {
		fmt.Fprintf(b, ", %d not found within 10s", res.LagFailed)
	}
	fmt.Fprintf(b, "; the first `subject:` query after the 250 found %d of %d.\n\n", res.MetaFirst, len(res.Lag)+res.LagFailed)

	emails := last.Emails + res.LagBackground + len(res.Lag)
	fmt.Fprintf(b, "Restart on the same store with %d emails: the new process was ready (its banner) %s after it was started, and "+
		"found the oldest email with a rare word by that word %s after it was started (the whole account loaded into the index, "+
		"digests read from the store); its CPU by then %s; RSS then %s (anon %s), against %s (anon %s) for an empty server: "+
		"%s (anon %s) per 100,000 emails above the empty server's.\n\n",
		emails, fmtDur(res.Ready), fmtDur(res.Found), res.RestartCPU.Round(10*time.Millisecond), MiB(res.RestartAfter.RSS), MiB(res.RestartAfter.RSSAnon),
		MiB(res.Empty.RSS), MiB(res.Empty.RSSAnon),
		MiB(per100k(res.RestartAfter.RSS-res.Empty.RSS, emails)), MiB(per100k(res.RestartAfter.RSSAnon-res.Empty.RSSAnon, emails)))

	if len(res.Steps) >= 2 {
		b.WriteString("Towards 1,000,000 emails: **an extrapolation, not a measurement**: a line `t(n) = a + b·n` fitted by least " +
			"squares to the steps above, read at n = 1,000,000 (the index is one slice and map per account, scanned newest first, " +
			"so a query that must look at every email grows linearly; one that finds its 25 early does not):\n\n")
		b.WriteString("| figure | a | b (per 100k emails) | at 1,000,000 |\n|---|---:|---:|---:|\n")
		for _, cat := range SearchCategories {
			for _, p := range []float64{50, 99} {
				var pts [][2]float64
				for _, s := range res.Steps {
					if q := s.Categories[cat]; q != nil {
						pts = append(pts, [2]float64{float64(s.Emails), float64(q.Latency.Percentile(p))})
					}
				}
				a, slope := FitLine(pts)
				fmt.Fprintf(b, "| %s p%.0f | %s | %s | %s |\n", cat, p, fmtSignedDur(a), fmtSignedDur(slope*1e5),
					fmtDur(time.Duration(max(a+slope*1e6, 0))))
			}
		}
		var pts [][2]float64
		for _, s := range res.Steps {
			pts = append(pts, [2]float64{float64(s.Emails), float64(s.After.RSSAnon)})
		}
		a, slope := FitLine(pts)
		fmt.Fprintf(b, "| RSS anon after indexing | %s | %s | %s |\n\n", MiB(int64(a)), MiB(int64(slope*1e5)), MiB(int64(a+slope*1e6)))
	}
}

// per100k scales n bytes for emails to 100,000 emails.
func per100k(n int64, emails int) int64 { return n * 100_000 / int64(max(emails, 1)) }

// fmtSignedDur formats d, negative ones with a minus sign.
func fmtSignedDur(d float64) string {
	if d < 0 {
		return "-" + fmtDur(time.Duration(-d))
	}
	return fmtDur(time.Duration(d))
}

// FitLine returns a and b of the least-squares line y = a + b·x through
// the points; with one point, the line through it and the origin's slope
// is 0.
func FitLine(pts [][2]float64) (a, b float64) {
	n := float64(len(pts))
	if n == 0 {
		return 0, 0
	}
	var sx, sy, sxx, sxy float64
	for _, p := range pts {
		sx, sy, sxx, sxy = sx+p[0], sy+p[1], sxx+p[0]*p[0], sxy+p[0]*p[1]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return sy / n, 0
	}
	b = (n*sxy - sx*sy) / d
	return (sy - b*sx) / n, b
}

// SearchVerdict is one target's row.
type SearchVerdict struct {
	// Category is the query category the target is about, if one.
	Category string
	Target   string
	Met      bool
	Evidence string
}

// Verdicts returns the targets' rows of the result, judged at its last
// step; a last step under SearchTargetEmails meets none.
func (res *SearchResult) Verdicts() []SearchVerdict {
	last := res.Last()
	if last == nil {
		return nil
	}
	big := last.Emails >= SearchTargetEmails
	p99 := func(cat string) (time.Duration, int) {
		q := last.Categories[cat]
		if q == nil {
			return 0, 0
		}
		return q.Latency.Percentile(99), len(q.Latency)
	}
	at := fmt.Sprintf(" at %d emails", last.Emails)
	var out []SearchVerdict
	op, n := p99(CatOperators)
	out = append(out, SearchVerdict{CatOperators, "operator-only list p99 <= 50 ms", big && n > 0 && op <= OperatorP99Target,
		fmt.Sprintf("p99 %s over %d requests%s", fmtDur(op), n, at)})
	var worst string
	var worstP99 time.Duration
	var parts []string
	everyOne := true // every body-word category was measured
	for _, cat := range SearchCategories {
		if !isBodyCategory(cat) {
			continue
		}
		p, n := p99(cat)
		parts = append(parts, fmt.Sprintf("%s %s (%d)", cat, fmtDur(p), n))
		everyOne = everyOne && n > 0
		if worst == "" || p > worstP99 {
			worst, worstP99 = cat, p
		}
	}
	out = append(out, SearchVerdict{worst, "body-word list p99 <= 500 ms", big && everyOne && worst != "" && worstP99 <= BodyWordP99Target,
		"p99 " + strings.Join(parts, ", ") + at})
	c, n := p99(CatCountQuery)
	out = append(out, SearchVerdict{CatCountQuery, "`count?q=is:unread` p99 <= 5 ms", big && n > 0 && c <= CountUnreadP99Target,
		fmt.Sprintf("p99 %s over %d requests%s", fmtDur(c), n, at)})
	sent := len(res.Lag) + res.LagFailed
	out = append(out, SearchVerdict{"", "body words found within 1 s of the 250", big && sent > 0 && res.LagFailed == 0 && res.Lag.Max() <= BodyWordLagTarget,
		fmt.Sprintf("max %s, p50 %s over %d emails (%d not found within 10s)", fmtDur(res.Lag.Max()), fmtDur(res.Lag.Percentile(50)), sent, res.LagFailed)})
	out = append(out, SearchVerdict{"", "metadata (`subject:`) found at once", big && sent > 0 && res.MetaFirst == sent,
		fmt.Sprintf("the first query after the 250 found %d of %d", res.MetaFirst, sent)})
	return out
}

func verdictText(met bool) string {
	if met {
		return "met"
	}
	return "**not met**"
}

// trimTop keeps the header and the first n rows of a pprof -top listing.
func trimTop(top string, n int) string {
	lines := strings.Split(strings.TrimSpace(top), "\n")
	for i, l := range lines {
		if strings.Contains(l, "flat%") {
			return strings.Join(lines[:min(len(lines), i+1+n)], "\n")
		}
	}
	return strings.Join(lines[:min(len(lines), n)], "\n")
}
