package smtpd_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/accounts"
	"github.com/mailsink/mailsink/internal/faults"
	"github.com/mailsink/mailsink/internal/gate"
	"github.com/mailsink/mailsink/internal/ingest"
	"github.com/mailsink/mailsink/internal/metrics"
	"github.com/mailsink/mailsink/smtpd"
	"github.com/mailsink/mailsink/store"
)

// nullStore stores nothing and has no fault rules: the benchmarks below
// measure the server's own work per message, not a store's.
type nullStore struct {
	store.Store
	created atomic.Int64
}

func (s *nullStore) CreateEmails(ctx context.Context, body *store.Body, emails []*store.Email) error {
	s.created.Add(int64(len(emails)))
	return nil
}

func (s *nullStore) Faults(ctx context.Context, accountID string) ([]*store.FaultRule, error) {
	return nil, nil
}

// benchServer starts an SMTP server as the app wires it (metrics, fault
// injection, the buffer budget, the large-transfer gate) over a store that
// keeps nothing.
func benchServer(b *testing.B) (*smtpd.Server, *nullStore) {
	b.Helper()
	st := &nullStore{}
	reg := accounts.New([]config.Account{{ID: "acc-1", Slug: "default", Name: "Default"}})
	m := metrics.New(prometheus.NewRegistry(), "bench")
	log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ing := ingest.New(st, time.Now, ingest.Config{MaxRecipients: 100, Log: log})
	srv := smtpd.New(smtpd.Config{
		Addr:            "127.0.0.1:0",
		Domain:          "mailsink",
		StoreTimeout:    10 * time.Second,
		MaxMessageBytes: 25 << 20,
		MaxRecipients:   100,
		ReadTimeout:     time.Minute,
		WriteTimeout:    time.Minute,
		DataTimeout:     10 * time.Minute,
		Connections:     smtpd.ConnectionLimits{Total: 1000},
		Buffers:         gate.NewBudget(64<<20, 8<<20),
		LargeGate:       gate.New(2, 1),
		Metrics:         m,
		Faults:          faults.New(st, faults.Config{Metrics: m, Log: log}),
	}, reg, ing, log)
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return srv, st
}

// benchMessage is a 2 KB text message shaped like the load tool's.
func benchMessage(i int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "From: Load Tool <sender@bench.test>\r\nTo: r%d.run@bench.test\r\nSubject: bench run m%d\r\n", i%100, i)
	b.WriteString("Date: Sun, 22 Nov 2026 12:00:00 +0000\r\n")
	fmt.Fprintf(&b, "Message-ID: <m%d.run@bench.test>\r\nMIME-Version: 1.0\r\n", i)
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\n\r\n")
	for b.Len() < 2000 {
		b.WriteString("The quick brown fox jumps over the lazy dog; a load test line.\r\n")
	}
	return b.String()
}

// benchClient is a minimal SMTP client: one command, one reply, or the
// transaction's commands in one write (pipeline).
type benchClient struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
}

func dialBench(b *testing.B, addr string) *benchClient {
	b.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	c := &benchClient{conn: conn, r: bufio.NewReader(conn), w: bufio.NewWriterSize(conn, 16<<10)}
	c.expect(b, "220")
	c.command(b, "EHLO bench.test\r\n", "250")
	return c
}

// expect reads one reply, multi-line ones included, and fails unless its
// code is code.
func (c *benchClient) expect(b *testing.B, code string) {
	b.Helper()
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		if !strings.HasPrefix(line, code) {
			b.Fatalf("reply %q, want %s", line, code)
		}
		if len(line) < 4 || line[3] != '-' {
			return
		}
	}
}

func (c *benchClient) command(b *testing.B, line, code string) {
	b.Helper()
	c.w.WriteString(line)
	if err := c.w.Flush(); err != nil {
		b.Fatal(err)
	}
	c.expect(b, code)
}

func (c *benchClient) send(b *testing.B, raw string, pipeline bool) {
	b.Helper()
	if pipeline {
		c.w.WriteString("MAIL FROM:<sender@bench.test>\r\nRCPT TO:<r1.run@bench.test>\r\nDATA\r\n")
		c.w.Flush()
		c.expect(b, "250")
		c.expect(b, "250")
		c.expect(b, "354")
	} else {
		c.command(b, "MAIL FROM:<sender@bench.test>\r\n", "250")
		c.command(b, "RCPT TO:<r1.run@bench.test>\r\n", "250")
		c.command(b, "DATA\r\n", "354")
	}
	c.w.WriteString(raw)
	c.command(b, ".\r\n", "250")
}

// processCPU is the CPU time (user and system) the process has used, in
// nanoseconds: on a shared machine a steadier figure than the wall time.
func processCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkSession measures the server's work per 2 KB message over one
// connection (store excluded): the client's commands one at a time, or
// pipelined, or a new connection per message (greeting, EHLO, QUIT).
// cpu-ns/op is the CPU time of the process, the client's included.
func BenchmarkSession(b *testing.B) {
	raw := benchMessage(1)
	for _, bm := range []struct {
		name            string
		pipeline, fresh bool
	}{
		{"reused", false, false},
		{"pipelined", true, false},
		{"new-connection", false, true},
	} {
		b.Run(bm.name, func(b *testing.B) {
			srv, st := benchServer(b)
			addr := srv.Addr().String()
			var c *benchClient
			if !bm.fresh {
				c = dialBench(b, addr)
				defer c.conn.Close()
			}
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				if bm.fresh {
					c = dialBench(b, addr)
				}
				c.send(b, raw, bm.pipeline)
				if bm.fresh {
					c.command(b, "QUIT\r\n", "221")
					c.conn.Close()
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
			if st.created.Load() == 0 {
				b.Fatal("nothing stored")
			}
		})
	}
}

// BenchmarkConnection measures what a connection costs beside its messages:
// accept, greeting, EHLO, QUIT and close, with no transaction.
// cpu-ns/op is the CPU time of the process, the client's included.
func BenchmarkConnection(b *testing.B) {
	srv, _ := benchServer(b)
	addr := srv.Addr().String()
	b.ReportAllocs()
	cpu := processCPU()
	for b.Loop() {
		c := dialBench(b, addr)
		c.command(b, "QUIT\r\n", "221")
		c.conn.Close()
	}
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}
