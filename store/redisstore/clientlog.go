package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// ClientLogger passes go-redis's own log lines to a structured logger, at
// most one a second: during an outage go-redis logs each failed dial of
// each connection pool, several a second, for as long as the outage lasts.
// A line that follows dropped ones counts them. main installs it with
// redis.SetLogger, go-redis's process-wide logger.
type ClientLogger struct {
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex
	last    time.Time // when the last line was logged
	dropped int       // lines dropped since
}

// NewClientLogger returns a ClientLogger that logs to log at level Warn.
func NewClientLogger(log *slog.Logger, now func() time.Time) *ClientLogger {
	return &ClientLogger{log: log, now: now}
}

// Printf logs one line of go-redis, unless one was logged less than a
// second ago.
func (l *ClientLogger) Printf(ctx context.Context, format string, args ...any) {
	l.mu.Lock()
	now := l.now()
	if !l.last.IsZero() && now.Sub(l.last) < time.Second {
		l.dropped++
		l.mu.Unlock()
		return
	}
	dropped := l.dropped
	l.last, l.dropped = now, 0
	l.mu.Unlock()
	text := strings.TrimPrefix(fmt.Sprintf(format, args...), "redis: ")
	attrs := []any{"detail", text}
	if dropped > 0 {
		attrs = append(attrs, "dropped", dropped)
	}
	l.log.WarnContext(ctx, "redis client", attrs...)
}
