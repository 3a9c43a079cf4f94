package loadgen

import (
	"strings"
	"testing"
	"time"
)

func ingestResult(name, backend string, sent int, elapsed time.Duration, cpu, redisCPU time.Duration) *Result {
	return &Result{Scenario: Scenario{Name: name, Kind: "ingest"}, Backend: backend,
		Ingest: &IngestResult{Sent: sent, Elapsed: elapsed},
		Before: ProcSample{CPU: time.Second}, After: ProcSample{CPU: time.Second + cpu}, RedisCPU: redisCPU}
}

func goal(t *testing.T, text string) Goal {
	t.Helper()
	for _, g := range Goals() {
		if g.Text == text {
			return g
		}
	}
	t.Fatalf("no goal %q", text)
	return Goal{}
}

// checkGoal checks the verdict of the goal named text on r, and that its
// evidence holds evidenceHas.
func checkGoal(t *testing.T, r *Report, text, verdict, evidenceHas string) {
	t.Helper()
	v, ev := goal(t, text).Check(r)
	if v != verdict || !strings.Contains(ev, evidenceHas) {
		t.Errorf("%s: got %q, %q; want %q with %q", text, v, ev, verdict, evidenceHas)
	}
}

func TestVersusPeer(t *testing.T) {
	redisRow := "2 KB over 8 reused connections, Redis: >= 1.1 × Inbucket's msg/s"
	embeddedRow := "2 KB over 8 reused connections, embedded (durable): >= 0.8 × Inbucket's msg/s"
	withPeer := &Report{PeerBinary: "/x/inbucket", Results: []*Result{
		ingestResult(Ingest2KReuse, PeerInbucket, 8000, time.Second, 0, 0),  // 8,000 msg/s
		ingestResult(Ingest2KReuse, "redis", 8800, time.Second, 0, 0),       // 1.10 ×
		ingestResult(Ingest2KReuse, "embedded", 6399, time.Second, 0, 0),    // 0.7999 ×
		ingestResult(Ingest2KNewConn, "redis", 100, time.Second, 0, 0),      // no Inbucket row
		ingestResult(Ingest2KNewConn, PeerInbucket, 100, time.Second, 0, 0), // but embedded has none
	}}
	for _, tc := range []struct {
		report      *Report
		text        string
		verdict     string
		evidenceHas string
	}{
		{withPeer, redisRow, Met, "1.10 ×"},
		{withPeer, embeddedRow, NotMet, "Inbucket 8000 msg/s"},
		{withPeer, "2 KB, new connection per message, embedded (durable): >= 0.8 × Inbucket's msg/s", NotMeasured, "no ingest-2k-newconn run on embedded"},
		{withPeer, "100 KB with a base64 attachment, Redis: >= 1.1 × Inbucket's msg/s", NotMeasured, "no Inbucket"},
		// Without the binary: never a verdict, say how to get one.
		{&Report{Results: withPeer.Results[1:3]}, redisRow, NoPeer, "mailsink redis 8800 msg/s"},
	} {
		checkGoal(t, tc.report, tc.text, tc.verdict, tc.evidenceHas)
	}
	if !strings.Contains(NoPeer, EnvInbucket) {
		t.Errorf("%q does not name %s", NoPeer, EnvInbucket)
	}
}

func TestCPUAndFootprintGoals(t *testing.T) {
	r := &Report{Results: []*Result{
		// 1,000 messages: 60 ms + 40 ms = 100 µs each, at the line.
		ingestResult(Ingest2KReuse, "redis", 1000, time.Second, 60*time.Millisecond, 40*time.Millisecond),
		ingestResult(Ingest2KReuse, "embedded", 1000, time.Second, 101*time.Millisecond, 0),
	}, Footprints: []*Footprint{
		{Backend: "redis", Emails: 1000, RawBytes: 2048, UsedBefore: 1 << 20, UsedAfter: 1<<20 + 1000*4096},
		{Backend: "embedded", Emails: 1000, RawBytes: 2048, DirBefore: 9 << 20, DirAfter: 1000 * 3073},
	}}
	for _, tc := range []struct{ text, verdict, evidenceHas string }{
		{"CPU per 2 KB message, mailsink + redis-server together: <= 100 µs", Met, "mailsink 60µs + redis-server 40µs = 100µs"},
		{"CPU per 2 KB message, mailsink on the embedded store: <= 100 µs", NotMet, "mailsink 101µs"},
		{"Redis memory per email <= its raw size + 2 KB", Met, "4096 B per email (raw + 2048 B)"},
		{"embedded store's files per email (without the log files Pebble keeps for reuse) <= its raw size + 1 KB", NotMet, "3073 B per email"},
	} {
		checkGoal(t, r, tc.text, tc.verdict, tc.evidenceHas)
	}
	if v, _ := goal(t, "fsync ceiling of the disk under the embedded store's data directory: measured and stated").Check(r); v != NotMeasured {
		t.Errorf("fsync without a probe: %q", v)
	}
}

func TestLargeGoals(t *testing.T) {
	lat := func(n int, d time.Duration) Latencies {
		l := make(Latencies, n)
		for i := range l {
			l[i] = d
		}
		return l
	}
	r := &Report{Results: []*Result{
		{Scenario: Scenario{Name: List1M, Kind: "list"}, Backend: "redis", AccountEmails: 1_000_000,
			Query: &QueryResult{Requests: 10_000, Latency: lat(10_000, 900*time.Microsecond)}, After: ProcSample{RSS: 50 << 20, CPU: 1}},
		{Scenario: Scenario{Name: List1MLoad, Kind: "list", LoadConns: 8, LoadRate: 1000}, Backend: "redis", AccountEmails: 1_010_000,
			Query: &QueryResult{Requests: 10_000, Latency: lat(10_000, 2*time.Millisecond)}, Load: &IngestResult{Sent: 9000, Elapsed: 10 * time.Second}},
		{Scenario: Scenario{Name: List1M, Kind: "list"}, Backend: "embedded", AccountEmails: 1_000_000,
			Query: &QueryResult{Requests: 500, Latency: lat(500, 100*time.Microsecond)}},
	}}
	for _, tc := range []struct{ text, verdict, evidenceHas string }{
		{"list by recipient p99 <= 1 ms, 1,000,000 emails in one account, >= 10,000 lookups, idle (redis)", Met, "p99 900µs"},
		{"list by recipient p99 <= 1 ms, 1,000,000 emails in one account, >= 10,000 lookups, under ingest load (redis)", NotMet, "900 msg/s achieved"},
		{"list by recipient p99 <= 1 ms, 1,000,000 emails in one account, >= 10,000 lookups, idle (embedded)", NotMeasured, "fewer than 10000 lookups"},
		{"mailsink RSS <= 100 MB with 1,000,000 emails in Redis", Met, "VmRSS 50.0 MiB"},
		{"list by recipient p99 <= 1 ms, 1,000,000 emails in one account, >= 10,000 lookups, under ingest load (embedded)", NotMeasured, "no list-1m-under-ingest run on embedded"},
	} {
		checkGoal(t, r, tc.text, tc.verdict, tc.evidenceHas)
	}
	// A trial with a small account gives no verdict on the 1,000,000 targets.
	small := &Report{Results: []*Result{{Scenario: Scenario{Name: List1M, Kind: "list"}, Backend: "redis", AccountEmails: 20_000,
		Query: &QueryResult{Requests: 10_000, Latency: lat(10_000, time.Microsecond)}, After: ProcSample{RSS: 20 << 20, CPU: 1}}}}
	for _, text := range []string{"mailsink RSS <= 100 MB with 1,000,000 emails in Redis", "list by recipient p99 <= 1 ms, 1,000,000 emails in one account, >= 10,000 lookups, idle (redis)"} {
		if v, ev := goal(t, text).Check(small); v != NotMeasured {
			t.Errorf("%s at 20,000 emails: %q, %q; want %q", text, v, ev, NotMeasured)
		}
	}
	// The report marks every goal of its suite, measured or not.
	r.Suite = SuiteLarge
	md := r.Markdown()
	for _, g := range Goals() {
		if in := strings.Contains(md, "| "+g.Text+" |"); in != (g.Suite == SuiteLarge) {
			t.Errorf("goal %q in the large report: %v", g.Text, in)
		}
	}
}

func TestCeilings(t *testing.T) {
	res := ingestResult(Ingest2KReuse, "redis", 1000, time.Second, 100*time.Millisecond, 50*time.Millisecond)
	res.ToolCPU = 50 * time.Millisecond
	r := &Report{Machine: Machine{NProc: "2\n"}, Results: []*Result{res}}
	got := r.ceilings()
	if want := "| redis | ingest-2k-reuse | 100µs | 50µs | 50µs | 200µs | 10000 msg/s | 1000 msg/s |"; !strings.Contains(got, want) {
		t.Errorf("ceilings:\n%s\nwant the row %s", got, want)
	}
}
