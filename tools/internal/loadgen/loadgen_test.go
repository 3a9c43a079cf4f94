package loadgen

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/mailparse"
	"github.com/mailsink/mailsink/internal/testenv"
)

// TestScenarios runs small versions of the standard scenarios against an
// in-process mailsink with one account on each store, so every recipient
// lands in it; the server is this process, so /proc figures are ours.
func TestScenarios(t *testing.T) {
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			env := testenv.Start(t, b, func(c *config.Config) { c.Accounts = c.Accounts[:1] })
			r := NewRunner(Target{SMTP: env.SMTP, HTTP: env.BaseURL, APIKey: testenv.AcmeKey, PID: os.Getpid(), Backend: b.Name}, nil, nil)
			// The server is this process, whose tests never quite go
			// idle: the wait is tried, and bounded.
			r.SettleMax = time.Second
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			loaded := 0
			for _, s := range []Scenario{
				{Name: "reuse", Kind: "ingest", Messages: 60, Connections: 3, Reuse: true, Size: 2048, Shape: ShapePlain, Recipients: 7, PerMessage: 1, Verify: true},
				{Name: "pipelined", Kind: "ingest", Messages: 40, Connections: 2, Reuse: true, Pipeline: true, Size: 2048, Shape: ShapePlain, Recipients: 5, PerMessage: 3, Verify: true},
				{Name: "pipelined-newconn", Kind: "ingest", Messages: 10, Connections: 2, Pipeline: true, Size: 512, Shape: ShapePlain, Recipients: 2, PerMessage: 1, Verify: true},
				{Name: "newconn", Kind: "ingest", Messages: 20, Connections: 2, Size: 2048, Shape: ShapePlain, Recipients: 3, PerMessage: 2, Verify: true},
				{Name: "attachment", Kind: "ingest", Messages: 10, Connections: 2, Reuse: true, Size: 100 << 10, Shape: ShapeAttachment, Recipients: 2, PerMessage: 1, Verify: true},
				{Name: "list", Kind: "list", AccountSize: 400, Connections: 4, Reuse: true, Size: 1024, Shape: ShapePlain, Recipients: 10, PerMessage: 5, Queries: 30, QueryConns: 2},
				// Nothing left to store: the same recipients, looked up
				// during a paced SMTP ingest.
				{Name: "list-under-ingest", Kind: "list", AccountSize: 400, Connections: 4, Reuse: true, Size: 1024, Shape: ShapePlain, Recipients: 10, PerMessage: 5,
					Queries: 30, QueryConns: 1, LoadConns: 2, LoadRate: 300},
			} {
				res, err := r.Run(ctx, s)
				if err != nil {
					t.Fatalf("%s: %v", s.Name, err)
				}
				if s.Kind == "ingest" {
					if got, want := res.Verify.Found, s.Emails(); got != want || res.Ingest.Sent != s.Messages {
						t.Errorf("%s: sent %d, found %d emails via the API; want %d messages, %d emails", s.Name, res.Ingest.Sent, got, s.Messages, want)
					}
				} else if res.Query.Requests != s.Queries || res.Query.Items == 0 {
					t.Errorf("%s: %d requests listed %d emails; want %d requests", s.Name, res.Query.Requests, res.Query.Items, s.Queries)
				}
				if s.LoadConns > 0 {
					if res.Ingest != nil || res.Load == nil || res.Load.Sent == 0 || res.Load.Failed != 0 {
						t.Errorf("%s: prefill %+v, load %+v; want no prefill and a load that stored messages", s.Name, res.Ingest, res.Load)
					} else {
						loaded = res.Load.Sent
					}
				}
				if res.After.CPU < res.Before.CPU || res.After.RSS == 0 {
					t.Errorf("%s: /proc samples before %+v after %+v", s.Name, res.Before, res.After)
				}
			}
			// The list scenario's prefill tops the account up to its size;
			// the load during the second adds its messages.
			if got := r.emails; got != 400+loaded {
				t.Errorf("runner counted %d emails in the account, want 400 + %d", got, loaded)
			}
		})
	}
}

func TestMessageShapes(t *testing.T) {
	for _, tc := range []struct {
		shape string
		size  int
	}{{ShapePlain, 2048}, {ShapeAttachment, 100 << 10}} {
		m, err := NewMessages("run1", 5, 2, tc.size, tc.shape)
		if err != nil {
			t.Fatal(err)
		}
		raw := m.Build(7, nil)
		if d := len(raw) - tc.size; d < -200 || d > 200 {
			t.Errorf("%s: %d bytes, want about %d", tc.shape, len(raw), tc.size)
		}
		msg, _ := mailparse.Parse(raw)
		if msg.Subject == nil || *msg.Subject != m.Subject(7) {
			t.Errorf("%s: subject %v, want %q", tc.shape, msg.Subject, m.Subject(7))
		}
		if tc.shape == ShapeAttachment && len(msg.Body.Attachments) != 1 {
			t.Errorf("%s: %d attachments, want 1", tc.shape, len(msg.Body.Attachments))
		}
		if got := m.RecipientsOf(7); len(got) != 2 || got[0] != 4 || got[1] != 0 {
			t.Errorf("RecipientsOf(7) = %v, want [4 0]", got)
		}
	}
}

func TestPercentile(t *testing.T) {
	var l Latencies
	for i := 100; i >= 1; i-- {
		l = append(l, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0.1, time.Millisecond}} {
		if got := l.Percentile(tc.p); got != tc.want {
			t.Errorf("Percentile(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
}

func TestWriteSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(path, []byte("# Title\n\nanalysis\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteSection(path, "standard", "first"); err != nil {
		t.Fatal(err)
	}
	if err := WriteSection(path, "large", "big"); err != nil {
		t.Fatal(err)
	}
	if err := WriteSection(path, "standard", "second\n"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	want := "# Title\n\nanalysis\n\n<!-- BEGIN standard -->\nsecond\n<!-- END standard -->\n\n<!-- BEGIN large -->\nbig\n<!-- END large -->\n"
	if string(got) != want {
		t.Errorf("file is\n%s\nwant\n%s", got, want)
	}
}

func TestReadProc(t *testing.T) {
	s, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.RSS <= 0 || s.HWM < s.RSS {
		t.Errorf("ReadProc = %+v: want RSS > 0 and peak >= RSS", s)
	}
	m, err := ReadMachine()
	if err != nil || m.Total <= 0 {
		t.Errorf("ReadMachine = %+v, %v", m, err)
	}
	if !strings.Contains(MiB(3<<20), "3.0 MiB") {
		t.Errorf("MiB(3<<20) = %q", MiB(3<<20))
	}
}

func TestWriteDotStuffed(t *testing.T) {
	for in, want := range map[string]string{
		"a\r\nb\r\n":          "a\r\nb\r\n",
		".a\r\n..b\r\nc.\r\n": "..a\r\n...b\r\nc.\r\n",
		"no final crlf":       "no final crlf\r\n",
	} {
		var b strings.Builder
		w := bufio.NewWriter(&b)
		writeDotStuffed(w, []byte(in))
		w.Flush()
		if b.String() != want {
			t.Errorf("writeDotStuffed(%q) = %q, want %q", in, b.String(), want)
		}
	}
}

// A connection that fails is nil, so the sender dials again rather than
// sending on it (a typed nil in the interface crashed the tool).
func TestConnectFailureIsNil(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c, err := connect(context.Background(), addr, IngestOptions{})
	if err == nil || c != nil {
		t.Errorf("connect to a closed port: %v, %v; want an error and nil", c, err)
	}
}
