package boltstore

import (
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Compact rewrites the store file at path without the space that deleted
// emails left free, with the process that uses it stopped. bbolt reuses
// freed pages for new mail but never shrinks its file: after a large
// delete, Compact gives the space back to the disk. It writes a new file
// beside path and renames it over path only when the copy is complete, so
// that a failure leaves the old file as it was. It returns the sizes before
// and after.
func Compact(path string) (before, after int64, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	src, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return 0, 0, fmt.Errorf("open %s (is mailsink still running?): %w", path, err)
	}
	defer src.Close()
	tmp := path + ".compact"
	_ = os.Remove(tmp)
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{FreelistType: bolt.FreelistMapType})
	if err != nil {
		return 0, 0, err
	}
	if err := bolt.Compact(dst, src, 64<<20); err != nil {
		dst.Close()
		os.Remove(tmp)
		return 0, 0, fmt.Errorf("compact %s: %w", path, err)
	}
	if err := dst.Close(); err != nil {
		os.Remove(tmp)
		return 0, 0, err
	}
	nfi, err := os.Stat(tmp)
	if err != nil {
		return 0, 0, err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return 0, 0, err
	}
	return fi.Size(), nfi.Size(), nil
}
