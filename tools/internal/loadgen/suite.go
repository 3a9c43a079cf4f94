package loadgen

import (
	"fmt"
	"strings"
)

// Names of the scenarios of the standard and large suites.
const (
	Ingest2KReuse   = "ingest-2k-reuse"
	Ingest2KNewConn = "ingest-2k-newconn"
	Ingest2KPipe    = "ingest-2k-pipelined"
	Ingest100K      = "ingest-100k-attachment"
	Ingest25M       = "ingest-25m-concurrent"
	List16K         = "list-16k"
	List100K        = "list-100k"
	List1M          = "list-1m"
	List1MLoad      = "list-1m-under-ingest"
)

// Standard is the set `make bench` runs on each store: a few minutes in all
// on a 2-core machine.
func Standard() []Scenario {
	return []Scenario{
		// First, while the account holds no more: list at 16,000 emails.
		// Every list scenario spreads its prefill so that each recipient
		// holds a page (25) of emails, as Inbucket's mailboxes do in its
		// rows (Peer).
		{Name: List16K, Kind: "list", AccountSize: 16_000, Connections: 8, Reuse: true,
			Size: 2048, Shape: ShapePlain, Recipients: 640, PerMessage: 20, MailboxSize: 25, Verify: false,
			Queries: 5_000, QueryConns: 1},
		{Name: Ingest2KReuse, Kind: "ingest", Messages: 30_000, Connections: 8, Reuse: true,
			Size: 2048, Shape: ShapePlain, Recipients: 100, PerMessage: 1, Verify: true},
		{Name: Ingest2KPipe, Kind: "ingest", Messages: 20_000, Connections: 8, Reuse: true, Pipeline: true,
			Size: 2048, Shape: ShapePlain, Recipients: 100, PerMessage: 1, Verify: true},
		{Name: Ingest2KNewConn, Kind: "ingest", Messages: 10_000, Connections: 8, Reuse: false,
			Size: 2048, Shape: ShapePlain, Recipients: 100, PerMessage: 1, Verify: true},
		{Name: Ingest100K, Kind: "ingest", Messages: 5_000, Connections: 8, Reuse: true,
			Size: 100 * 1024, Shape: ShapeAttachment, Recipients: 100, PerMessage: 1, Verify: true},
		{Name: List100K, Kind: "list", AccountSize: 100_000, Connections: 8, Reuse: true,
			Size: 2048, Shape: ShapePlain, Recipients: 1_000, PerMessage: 20, MailboxSize: 25, Verify: false,
			Queries: 5_000, QueryConns: 1},
		// Last: the server's peak memory (VmHWM) is for its whole life.
		{Name: Ingest25M, Kind: "ingest", Messages: 100, Connections: 100, Reuse: true,
			Size: 26_000_000, Shape: ShapeAttachment, Recipients: 100, PerMessage: 1, Verify: true},
	}
}

// Peer is the set run against a peer (Inbucket) in the same suite run: the
// ingest rows the targets compare, and list by recipient at the same store
// sizes. Inbucket lists a whole mailbox, so its list scenarios, like
// mailsink's, spread their prefill over recipients of 25 emails each
// (MailboxSize), the page size of mailsink's list requests. Its memory
// store takes no 25 MB message (its default limit is 10 MB).
func Peer() []Scenario {
	var out []Scenario
	for _, s := range Standard() {
		switch s.Name {
		case List16K, Ingest2KReuse, Ingest2KNewConn, Ingest100K, List100K:
			out = append(out, s)
		}
	}
	return out
}

// Scale returns the scenarios with their message counts, store sizes and
// requests multiplied by f (at least 1 each), for a short trial of the
// suite; the 25 MB scenario keeps its 100 connections.
func Scale(scenarios []Scenario, f float64) []Scenario {
	if f == 1 {
		return scenarios
	}
	n := func(v int) int {
		if v == 0 {
			return 0
		}
		return max(int(float64(v)*f), 1)
	}
	out := make([]Scenario, len(scenarios))
	for i, s := range scenarios {
		s.Messages, s.AccountSize, s.Queries = n(s.Messages), n(s.AccountSize), n(s.Queries)
		s.Recipients = min(s.Recipients, max(n(s.Recipients), s.PerMessage))
		if s.Name == Ingest25M {
			s.Messages = max(s.Messages, min(s.Connections, 10))
		}
		out[i] = s
	}
	return out
}

// Large is the large set (`make bench` after the standard one, `make
// bench-large` alone): one account of 1,000,000 emails, then list
// latency, with the server's RSS at that size.
func Large() []Scenario {
	return []Scenario{
		{Name: List1M, Kind: "list", AccountSize: 1_000_000, Connections: 8, Reuse: true,
			Size: 2048, Shape: ShapePlain, Recipients: 1_000, PerMessage: 50, Verify: false,
			Queries: 10_000, QueryConns: 1},
		// The same lookups while 8 SMTP clients store 2 KB messages at a
		// moderate rate, 1,000 a second in all.
		{Name: List1MLoad, Kind: "list", AccountSize: 1_000_000, Connections: 8, Reuse: true,
			Size: 2048, Shape: ShapePlain, Recipients: 1_000, PerMessage: 50, Verify: false,
			Queries: 10_000, QueryConns: 1, LoadConns: 8, LoadRate: 1_000},
	}
}

// Command returns the mailsink-bench command line that runs s alone against
// a mailsink it starts on backend, or against the peer of that name.
func (s Scenario) Command(backend string) string {
	args := []string{"go run ./tools/mailsink-bench", "-store " + backend, "-mode " + s.Kind}
	if backend == PeerInbucket {
		args = []string{"go run ./tools/mailsink-bench", "-peer " + PeerInbucket, "-peer-bin $" + EnvInbucket, "-mode " + s.Kind}
	}
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
	if s.MailboxSize > 0 {
		args = append(args, fmt.Sprintf("-mailbox-size %d", s.MailboxSize))
	}
	if s.LoadConns > 0 {
		args = append(args, fmt.Sprintf("-load-conns %d", s.LoadConns), fmt.Sprintf("-load-rate %.0f", s.LoadRate))
	}
	args = append(args, fmt.Sprintf("-conns %d", s.Connections), fmt.Sprintf("-reuse=%v", s.Reuse),
		fmt.Sprintf("-size %d", s.Size), "-shape "+s.Shape, fmt.Sprintf("-recipients %d", s.Recipients),
		fmt.Sprintf("-rcpts-per-msg %d", s.PerMessage), fmt.Sprintf("-verify=%v", s.Verify))
	return strings.Join(args, " ")
}
