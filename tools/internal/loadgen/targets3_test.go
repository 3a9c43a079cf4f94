package loadgen

import (
	"strings"
	"testing"
	"time"
)

func round3Goal(t *testing.T, text string) Goal {
	t.Helper()
	for _, g := range Round3Goals() {
		if g.Text == text {
			return g
		}
	}
	t.Fatalf("no round 3 goal %q", text)
	return Goal{}
}

func checkRound3(t *testing.T, r *Report, text, verdict, evidenceHas string) {
	t.Helper()
	v, ev := round3Goal(t, text).Check(r)
	if v != verdict || !strings.Contains(ev, evidenceHas) {
		t.Errorf("%s: got %q, %q; want %q with %q", text, v, ev, verdict, evidenceHas)
	}
}

func listResult(name, backend string, requests int, p99, cpu time.Duration) *Result {
	lat := make(Latencies, requests)
	for i := range lat {
		lat[i] = p99
	}
	return &Result{Scenario: Scenario{Name: name, Kind: "list"}, Backend: backend, AccountEmails: 100_000,
		Query:  &QueryResult{Requests: requests, Latency: lat},
		Before: ProcSample{CPU: time.Second}, After: ProcSample{CPU: time.Second + cpu}}
}

func TestRound3Ingest(t *testing.T) {
	redisRow := ingestResult(Ingest2KReuse, "redis", 1000, time.Second, 50*time.Millisecond, 40*time.Millisecond)
	redisRow.RedisCommands = 3000
	redisRow.RedisCmds = []CmdStat{{Name: "evalsha", Calls: 1000, Usec: 30_000}, {Name: "publish", Calls: 2000, Usec: 4000}}
	r := &Report{PeerBinary: "/x/inbucket", Results: []*Result{
		ingestResult(Ingest2KReuse, PeerInbucket, 10_000, time.Second, 400*time.Millisecond, 0), // 40 µs a message
		redisRow, // 1,000 msg/s: 0.1 × Inbucket's
		ingestResult(Ingest2KReuse, "embedded", 9000, time.Second, 396*time.Millisecond, 0), // 44 µs, 0.9 ×
		ingestResult(Ingest2KReuse, "memory", 9999, time.Second, 0, 0),                      // 0.9999 ×
		ingestResult(Ingest100K, PeerInbucket, 1000, time.Second, 0, 0),                     //
		ingestResult(Ingest100K, "embedded", 1200, time.Second, 0, 0),                       // 1.2 ×
		ingestResult(Ingest2KNewConn, "embedded", 100, time.Second, 0, 0),                   // no Inbucket row
	}}
	for _, tc := range []struct{ text, verdict, evidenceHas string }{
		{"Redis: redis-server CPU per 2 KB create <= 40 µs", Met, "evalsha 1.00 calls, 30µs"},
		{"Redis: mailsink's own CPU per 2 KB message <= its CPU on the embedded store", NotMet, "mailsink 50µs per message on redis, 44µs on embedded"},
		{"embedded (Pebble): CPU per 2 KB message <= 1.1 × Inbucket's", Met, "Inbucket 40µs: 1.10 ×"},
		{"2 KB over 8 reused connections, embedded: >= 0.9 × Inbucket's msg/s", Met, "0.90 ×"},
		{"2 KB over 8 reused connections, `:memory:`: >= 1.0 × Inbucket's msg/s", NotMet, "1.00 ×"},
		{"100 KB with a base64 attachment, embedded: >= 1.2 × Inbucket's msg/s", Met, "1.20 ×"},
		{"2 KB, new connection per message, embedded: >= 1.0 × Inbucket's msg/s", NotMeasured, "no Inbucket"},
		{"2 KB, new connection per message, Redis: >= 1.0 × Inbucket's msg/s", NotMeasured, "no Inbucket ingest-2k-newconn result"},
	} {
		checkRound3(t, r, tc.text, tc.verdict, tc.evidenceHas)
	}
	// 41 µs of redis-server per create is over the line.
	redisRow.RedisCPU = 41 * time.Millisecond
	checkRound3(t, r, "Redis: redis-server CPU per 2 KB create <= 40 µs", NotMet, "redis-server 41µs per message")
	// Without Inbucket, the comparisons say how to get one.
	r.PeerBinary = ""
	r.Results = r.Results[1:4]
	checkRound3(t, r, "embedded (Pebble): CPU per 2 KB message <= 1.1 × Inbucket's", NoPeer, "mailsink embedded 44µs")
}

func TestRound3Reads(t *testing.T) {
	r := &Report{PeerBinary: "/x/inbucket", Results: []*Result{
		listResult(List16K, PeerInbucket, 100, 400*time.Microsecond, 10*time.Millisecond),  // 100 µs a request
		listResult(List100K, PeerInbucket, 100, 500*time.Microsecond, 10*time.Millisecond), // 100 µs
		listResult(List16K, "embedded", 100, 400*time.Microsecond, 10*time.Millisecond),
		listResult(List100K, "embedded", 100, 501*time.Microsecond, 20*time.Millisecond), // 2 ×
		listResult(List16K, "redis", 100, time.Millisecond, 5*time.Millisecond),
		listResult(List100K, "redis", 100, 900*time.Microsecond, 5*time.Millisecond),
	}}
	for _, tc := range []struct{ text, verdict, evidenceHas string }{
		{"list by recipient (embedded): server CPU per request <= Inbucket's, at 16k and 100k emails", NotMet, "list-100k: mailsink 200µs per request, Inbucket 100µs (2.00 ×)"},
		{"list by recipient (redis): server CPU per request <= Inbucket's, at 16k and 100k emails", Met, "list-16k: mailsink 50µs per request"},
		{"list by recipient (memory): server CPU per request <= Inbucket's, at 16k and 100k emails", NotMeasured, "no list-16k run on memory"},
		{"list by recipient p99 <= Inbucket's at 16k emails (embedded)", Met, "Inbucket p99 400µs"},
		{"list by recipient p99 <= Inbucket's at 100k emails (embedded)", NotMet, "p99 501µs"},
		{"list by recipient p99 <= 1 ms on Redis, at 16k and 100k emails", Met, "list-16k: p99 1.00ms"},
	} {
		checkRound3(t, r, tc.text, tc.verdict, tc.evidenceHas)
	}
}

func TestRound3ServerShare(t *testing.T) {
	text := "1,000,000 emails in one account under 1,000 msg/s of ingest (redis): >= 99% of list requests within 1 ms server-side (le=\"0.001\")"
	res := listResult(List1MLoad, "redis", 10_000, 2*time.Millisecond, time.Second)
	res.AccountEmails = 1_000_000
	res.ListServer = &listHistogram{Fast: 9900, Total: 10_000}
	res.LoadRate = 1000
	res.Load = &IngestResult{Sent: 10_000, Elapsed: 10 * time.Second}
	r := &Report{Suite: SuiteLarge, Results: []*Result{res}}
	checkRound3(t, r, text, Met, "9900 of 10000 list requests within 1 ms server-side (99.00%")
	res.ListServer.Fast = 9899
	checkRound3(t, r, text, NotMet, "98.99%")
	// A lighter ingest than asked, or one with failures, proves nothing.
	res.ListServer.Fast = 9900
	res.Load = &IngestResult{Sent: 5_000, Elapsed: 10 * time.Second}
	checkRound3(t, r, text, NotMeasured, "did not run at its rate")
	res.Load = &IngestResult{Sent: 10_000, Failed: 1, Elapsed: 10 * time.Second}
	checkRound3(t, r, text, NotMeasured, "did not run at its rate")
	res.Load = &IngestResult{Sent: 10_000, Elapsed: 10 * time.Second}
	res.AccountEmails = 20_000
	checkRound3(t, r, text, NotMeasured, "fewer than")
	// A standard run has none: the section says how to measure it.
	std := &Report{Suite: SuiteStandard, Scale: 1}
	checkRound3(t, std, text, NotMeasured, "no list-1m-under-ingest run on redis")
	if md := std.Round3Markdown(); !strings.Contains(md, "to measure: `make bench`") {
		t.Errorf("round 3 section does not say how to measure the large targets:\n%s", md)
	}
	// A standard run that went on to the large set marks them from it.
	res.AccountEmails = 1_000_000
	std.Large = r
	checkRound3Section(t, std, text, Met, "9900 of 10000 list requests within 1 ms server-side")
	// With the profile of the row, which says why when it is not met.
	res.Profile = "Duration: 2s, Total samples = 1.5s (75.00%)"
	if md := std.Round3Markdown(); !strings.Contains(md, "list-1m-under-ingest on redis:\n\n```\n"+res.Profile) {
		t.Errorf("round 3 section lacks the large row's profile:\n%s", md)
	}
}

// checkRound3Section checks the row of the target text in r's round 3
// section: its verdict, and evidence that holds evidenceHas.
func checkRound3Section(t *testing.T, r *Report, text, verdict, evidenceHas string) {
	t.Helper()
	md := r.Round3Markdown()
	for _, line := range strings.Split(md, "\n") {
		if rest, ok := strings.CutPrefix(line, "| "+text+" | "); ok {
			if !strings.HasPrefix(rest, verdict+" |") || !strings.Contains(rest, evidenceHas) {
				t.Errorf("%s: got row %q; want %q with %q", text, line, verdict, evidenceHas)
			}
			return
		}
	}
	t.Errorf("%s: no row in\n%s", text, md)
}

func TestRound3Memory(t *testing.T) {
	after := func(backend string, rss int64) *Result {
		res := ingestResult(Ingest100K, backend, 10, time.Second, time.Millisecond, 0)
		res.After.RSS = rss
		return res
	}
	big := func(backend string, hwm, anon int64) *Result {
		res := ingestResult(Ingest25M, backend, 100, time.Second, time.Millisecond, 0)
		res.After.HWM, res.PeakAnon = hwm, anon
		return res
	}
	r := &Report{Results: []*Result{after("redis", 100<<20), after("embedded", 100<<20+1),
		big("redis", 900<<20, 0), big("embedded", 2<<30, 500<<20)}}
	checkRound3(t, r, "mailsink RSS <= 100 MiB after the three ingest rows, default settings (redis)", Met, "VmRSS 100.0 MiB")
	checkRound3(t, r, "mailsink RSS <= 100 MiB after the three ingest rows, default settings (embedded)", NotMet, "after ingest-100k-attachment on embedded")
	checkRound3(t, r, "the first round's memory targets (100 concurrent 25 MB messages, <= 1 GiB) still met", Met, "sampled RssAnon peak 500.0 MiB")
	r.Results[2].After.HWM = 1<<30 + 1
	checkRound3(t, r, "the first round's memory targets (100 concurrent 25 MB messages, <= 1 GiB) still met", NotMet, "VmHWM 1024.0 MiB")
}

func TestRound3NoneLost(t *testing.T) {
	text := "no message lost or duplicated in any scenario"
	ok := ingestResult(Ingest2KReuse, "redis", 10, time.Second, 0, 0)
	ok.Verify = &VerifyResult{Expected: 10, Found: 10}
	r := &Report{Results: []*Result{ok}}
	checkRound3(t, r, text, Met, "1 scenarios verified through the API, 10 emails")
	dup := ingestResult(Ingest2KReuse, "embedded", 10, time.Second, 0, 0)
	dup.Verify = &VerifyResult{Expected: 10, Found: 11, Duplicates: 1}
	r.Results = append(r.Results, dup)
	checkRound3(t, r, text, NotMet, "ingest-2k-reuse on embedded: 0 missing, 1 duplicates")
	checkRound3(t, &Report{}, text, NotMeasured, "no scenario")
	// The large set of the same run counts, its failures too.
	r.Results = r.Results[:1]
	large := &Report{Suite: SuiteLarge, Results: []*Result{ok}}
	r.Large = large
	checkRound3(t, r, text, Met, "2 scenarios verified through the API, 20 emails")
	large.Failures = []string{"redis list-1m: server stopped"}
	checkRound3(t, r, text, NotMet, "failed: redis list-1m")
}

func TestParseServerSide(t *testing.T) {
	metrics := `# TYPE mailsink_http_request_duration_seconds histogram
mailsink_http_request_duration_seconds_bucket{method="GET",route="/v1/emails",le="0.0005"} 90
mailsink_http_request_duration_seconds_bucket{method="GET",route="/v1/emails",le="0.001"} 98
mailsink_http_request_duration_seconds_bucket{method="GET",route="/v1/emails/{emailId}",le="0.001"} 7
mailsink_http_request_duration_seconds_count{method="GET",route="/v1/emails"} 100
mailsink_http_request_duration_seconds_count{method="POST",route="/v1/emails"} 3
`
	h, err := parseListHistogram(strings.NewReader(metrics))
	if err != nil || h != (listHistogram{Fast: 98, Total: 100}) {
		t.Errorf("parseListHistogram: %+v, %v", h, err)
	}
	before := parseCommandStats(map[string]string{"cmdstat_evalsha": "calls=10,usec=100,usec_per_call=10.00", "cmdstat_ping": "calls=1,usec=1"})
	after := parseCommandStats(map[string]string{"cmdstat_evalsha": "calls=20,usec=300,usec_per_call=15.00", "cmdstat_ping": "calls=1,usec=1", "cmdstat_hget": "calls=5,usec=5", "used_cpu_sys": "1"})
	d := commandStatsDelta(before, after)
	if len(d) != 2 || d[0] != (CmdStat{Name: "evalsha", Calls: 10, Usec: 200}) || d[1].Name != "hget" {
		t.Errorf("commandStatsDelta: %+v", d)
	}
	if got := CommandStatsText(d, 10); !strings.Contains(got, "evalsha 1.00 calls, 20µs; hget 0.50 calls") {
		t.Errorf("CommandStatsText: %s", got)
	}
}
