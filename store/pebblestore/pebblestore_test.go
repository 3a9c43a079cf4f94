package pebblestore

import (
	"path/filepath"
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
