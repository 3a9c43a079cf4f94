//go:build !linux

package boltv4

import "os"

// fdatasync writes f's data to disk; where the system has no fdatasync, with
// fsync (on macOS, Go's Sync is F_FULLFSYNC).
func fdatasync(f *os.File) error { return f.Sync() }
