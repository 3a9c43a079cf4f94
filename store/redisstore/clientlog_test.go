package redisstore

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestClientLoggerOneLineASecond: go-redis's lines of an outage, many a
// second, become at most one structured line a second, and the next line
// says how many were dropped.
func TestClientLoggerOneLineASecond(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	l := NewClientLogger(slog.New(slog.NewTextHandler(&out, nil)), func() time.Time { return now })
	for range 30 { // three seconds of ten failed dials a second
		l.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts: %s", 5, "connection refused")
		now = now.Add(100 * time.Millisecond)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines for 3 seconds, want 3:\n%s", len(lines), out.String())
	}
	if want := `level=WARN msg="redis client" detail="connection pool: failed to dial after 5 attempts: connection refused"`; !strings.Contains(lines[0], want) || strings.Contains(lines[0], "dropped") {
		t.Errorf("first line %q, want %q", lines[0], want)
	}
	if !strings.HasSuffix(lines[1], " dropped=9") {
		t.Errorf("second line %q does not count the 9 dropped", lines[1])
	}
}
