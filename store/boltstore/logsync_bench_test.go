package boltstore

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// BenchmarkLogSync measures what the log's write and sync cost, one 4 KiB
// block at a time over a zero-filled file as the log writes (writeSync), and
// two ways of doing both in one system call that the log does not use:
// O_DSYNC, and O_DIRECT|O_DSYNC (which needs aligned blocks, so a log would
// rewrite its partial last block with each append). cpu-µs/op is the
// process's CPU per block, inside the kernel included: the figure to weigh
// against the time the disk takes.
func BenchmarkLogSync(b *testing.B) {
	cases := []struct {
		name  string
		flags int
		sync  bool
	}{
		{"write+fdatasync", 0, true},
		{"O_DSYNC", syscall.O_DSYNC, false},
		{"O_DIRECT|O_DSYNC", syscall.O_DIRECT | syscall.O_DSYNC, false},
	}
	path := filepath.Join(b.TempDir(), "log")
	if err := zeroFill(path); err != nil {
		b.Fatal(err)
	}
	const block = 4096
	buf := alignedBlock(block)
	for i := range buf {
		buf[i] = byte(i)
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			f, err := os.OpenFile(path, os.O_WRONLY|c.flags, 0o600)
			if err != nil {
				b.Skipf("open with %s: %v", c.name, err) // O_DIRECT on tmpfs, say
			}
			defer f.Close()
			b.SetBytes(block)
			cpu := processCPU()
			b.ResetTimer()
			for i := range b.N {
				off := int64(i) * block % walSegmentSize
				if _, err := f.WriteAt(buf, off); err != nil {
					b.Fatal(err)
				}
				if c.sync {
					if err := fdatasync(f); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// alignedBlock returns n bytes at a 4 KiB-aligned address, as O_DIRECT
// needs.
func alignedBlock(n int) []byte {
	b := make([]byte, n+4096)
	off := (4096 - int(uintptr(unsafe.Pointer(&b[0]))&4095)) & 4095
	return b[off : off+n]
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
