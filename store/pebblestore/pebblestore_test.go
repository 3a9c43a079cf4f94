package pebblestore

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Store {
		return openTemp(t, filepath.Join(t.TempDir(), "store"))
	})
}

func TestConformanceInMemory(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Store {
		s, err := OpenInMemory(64 << 20)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// openTemp opens a store in dir and closes it when the test ends.
func openTemp(t testing.TB, dir string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(dir, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestPebbleLogsThroughSlog: Pebble's own log lines reach the logger given
// with WithLogger, marked as Pebble's.
func TestPebbleLogsThroughSlog(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := openTemp(t, filepath.Join(t.TempDir(), "store"), WithLogger(log))
	// Close waits for Pebble's goroutines: the buffer is ours after it.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "component=pebble") {
		t.Errorf("no line of Pebble's in the log:\n%s", buf.String())
	}
}
