package loadgen

import (
	"fmt"
	"strings"
	"time"
)

// Names of the scenarios of the standard and large suites.
const (
	Ingest2KReuse   = "ingest-2k-reuse"
	Ingest2KNewConn = "ingest-2k-newconn"
	Ingest2KPipe    = "ingest-2k-pipelined"
	Ingest100K      = "ingest-100k-attachment"
	Ingest25M       = "ingest-25m-concurrent"
	List100K        = "list-100k"
	List1M          = "list-1m"
)

// Standard is the set `make bench` runs on each store: a few minutes in all
// on a 2-core machine.
func Standard() []Scenario {
	return []Scenario{
		{Name: Ingest2KReuse, Kind: "ingest", Messages: 30_000, Connections: 8, Reuse: true,
			Size: 2048, Shape: ShapePlain, Recipients: 100, PerMessage: 1, Verify: true},
		{Name: Ingest2KPipe, Kind: "ingest", Messages: 20_000, Connections: 8, Reuse: true, Pipeline: true,
			Size: 2048, Shape: ShapePlain, Recipients: 100, PerMessage: 1, Verify: true},
		{Name: Ingest2KNewConn, Kind: "ingest", Messages: 10_000, Connections: 8, Reuse: false,
			Size: 2048, Shape: ShapePlain, Recipients: 100, PerMessage: 1, Verify: true},
		{Name: Ingest100K, Kind: "ingest", Messages: 5_000, Connections: 8, Reuse: true,
			Size: 100 * 1024, Shape: ShapeAttachment, Recipients: 100, PerMessage: 1, Verify: true},
		{Name: List100K, Kind: "list", AccountSize: 100_000, Connections: 8, Reuse: true,
			Size: 2048, Shape: ShapePlain, Recipients: 1_000, PerMessage: 20, Verify: false,
			Queries: 5_000, QueryConns: 1},
		// Last: the server's peak memory (VmHWM) is for its whole life.
		{Name: Ingest25M, Kind: "ingest", Messages: 100, Connections: 100, Reuse: true,
			Size: 26_000_000, Shape: ShapeAttachment, Recipients: 100, PerMessage: 1, Verify: true},
	}
}

// Large is the opt-in set (`make bench-large`): one account of 1,000,000
// emails, then list latency, with the server's RSS at that size.
func Large() []Scenario {
	return []Scenario{
		{Name: List1M, Kind: "list", AccountSize: 1_000_000, Connections: 8, Reuse: true,
			Size: 2048, Shape: ShapePlain, Recipients: 1_000, PerMessage: 50, Verify: false,
			Queries: 5_000, QueryConns: 1},
	}
}

// Command returns the mailsink-bench command line that runs s alone against
// a mailsink it starts on backend.
func (s Scenario) Command(backend string) string {
	args := []string{"go run ./cmd/mailsink-bench", "-store " + backend, "-mode " + s.Kind}
	if s.Kind == "list" {
		args = append(args, fmt.Sprintf("-account-size %d", s.AccountSize),
			fmt.Sprintf("-queries %d", s.Queries), fmt.Sprintf("-query-conns %d", s.QueryConns))
	} else {
		args = append(args, fmt.Sprintf("-messages %d", s.Messages))
	}
	if s.Pipeline {
		args = append(args, "-pipeline")
	}
	if s.GoSMTP {
		args = append(args, "-gosmtp")
	}
	args = append(args, fmt.Sprintf("-conns %d", s.Connections), fmt.Sprintf("-reuse=%v", s.Reuse),
		fmt.Sprintf("-size %d", s.Size), "-shape "+s.Shape, fmt.Sprintf("-recipients %d", s.Recipients),
		fmt.Sprintf("-rcpts-per-msg %d", s.PerMessage), fmt.Sprintf("-verify=%v", s.Verify))
	return strings.Join(args, " ")
}

// Target is one of the performance targets.
type target struct {
	text    string
	backend string // "" for either
	check   func(rs []*Result) (verdict, evidence string)
}

func find(rs []*Result, name, backend string) *Result {
	for _, r := range rs {
		if r.Name == name && (backend == "" || r.Backend == backend) {
			return r
		}
	}
	return nil
}

func atLeast(name, backend string, want float64) func([]*Result) (string, string) {
	return func(rs []*Result) (string, string) {
		r := find(rs, name, backend)
		if r == nil || r.Ingest == nil {
			return "not measured", "no " + name + " run on " + backend
		}
		got := r.Ingest.PerSecond()
		return verdict(got >= want), fmt.Sprintf("%s on %s: %.0f msg/s", name, backend, got)
	}
}

func p99AtMost(name, backend string, want time.Duration) func([]*Result) (string, string) {
	return func(rs []*Result) (string, string) {
		r := find(rs, name, backend)
		if r == nil || r.Query == nil {
			return "not measured", "no " + name + " run on " + backend
		}
		got := r.Query.Latency.Percentile(99)
		return verdict(got <= want), fmt.Sprintf("%s on %s: p99 %s at %d emails", name, backend, fmtDur(got), r.AccountEmails)
	}
}

func verdict(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**not met**"
}

var targets = []target{
	{text: "2 KB, 8 reused connections, Redis: >= 10,000 msg/s", check: atLeast(Ingest2KReuse, "redis", 10_000)},
	{text: "2 KB, 8 reused connections, embedded: >= 5,000 msg/s", check: atLeast(Ingest2KReuse, "embedded", 5_000)},
	{text: "2 KB, new connection per message: >= 5,000 msg/s (Redis)", check: atLeast(Ingest2KNewConn, "redis", 5_000)},
	{text: "2 KB, new connection per message: >= 5,000 msg/s (embedded)", check: atLeast(Ingest2KNewConn, "embedded", 5_000)},
	{text: "100 KB with attachment: >= 2,000 msg/s (Redis)", check: atLeast(Ingest100K, "redis", 2_000)},
	{text: "100 KB with attachment: >= 2,000 msg/s (embedded)", check: atLeast(Ingest100K, "embedded", 2_000)},
	{text: "list by recipient p99 <= 1 ms at 100,000 emails (Redis)", check: p99AtMost(List100K, "redis", time.Millisecond)},
	{text: "list by recipient p99 <= 1 ms at 100,000 emails (embedded)", check: p99AtMost(List100K, "embedded", time.Millisecond)},
	{text: "list by recipient p99 <= 1 ms at 1,000,000 emails (Redis)", check: p99AtMost(List1M, "redis", time.Millisecond)},
	{text: "list by recipient p99 <= 1 ms at 1,000,000 emails (embedded)", check: p99AtMost(List1M, "embedded", time.Millisecond)},
	{text: "mailsink RSS <= 100 MB with 1,000,000 emails in Redis", check: func(rs []*Result) (string, string) {
		r := find(rs, List1M, "redis")
		if r == nil || r.After.RSS == 0 {
			return "not measured", "no " + List1M + " run on redis"
		}
		return verdict(r.After.RSS <= 100<<20), fmt.Sprintf("VmRSS %s (peak %s) after %d emails and the queries", MiB(r.After.RSS), MiB(r.After.HWM), r.AccountEmails)
	}},
	{text: "100 concurrent 25 MB messages do not multiply into gigabytes (Redis): mailsink peak RSS <= 1 GiB", check: memoryAtMost("redis")},
	{text: "100 concurrent 25 MB messages do not multiply into gigabytes (embedded): mailsink peak anonymous RSS <= 1 GiB", check: memoryAtMost("embedded")},
	{text: "mailsink CPU <= 0.1 ms per 2 KB message (Redis)", check: cpuAtMost("redis")},
	{text: "mailsink CPU <= 0.1 ms per 2 KB message (embedded)", check: cpuAtMost("embedded")},
}

// memoryAtMost checks the server's memory at its peak during the 25 MB
// scenario: VmHWM on Redis (the process's own memory), the sampled RssAnon
// peak on the embedded store, whose VmHWM also counts the pages of the
// memory-mapped bbolt file it wrote (file-backed, reclaimable).
func memoryAtMost(backend string) func([]*Result) (string, string) {
	return func(rs []*Result) (string, string) {
		r := find(rs, Ingest25M, backend)
		if r == nil || r.After.HWM == 0 {
			return "not measured", "no " + Ingest25M + " run on " + backend
		}
		got := r.After.HWM
		if backend == "embedded" {
			got = r.PeakAnon
		}
		return verdict(got <= 1<<30), fmt.Sprintf("%s on %s: VmHWM %s, sampled RssAnon peak %s, %d of %d messages of %d bytes stored",
			Ingest25M, backend, MiB(r.After.HWM), MiB(r.PeakAnon), r.Ingest.Sent, r.Messages, r.MessageBytes)
	}
}

func cpuAtMost(backend string) func([]*Result) (string, string) {
	return func(rs []*Result) (string, string) {
		r := find(rs, Ingest2KReuse, backend)
		if r == nil || r.After.CPU == 0 {
			return "not measured", "no " + Ingest2KReuse + " run on " + backend
		}
		got := r.CPUPerOp()
		return verdict(got <= 100*time.Microsecond), fmt.Sprintf("%s on %s: %s / %d = %s per message",
			Ingest2KReuse, backend, r.ServerCPU().Round(10*time.Millisecond), r.Ingest.Sent, fmtDur(got))
	}
}
