package boltv4

import (
	"os"
	"syscall"
)

// fdatasync writes f's data to disk, and of its metadata only what reading
// the data back needs (not the modification time).
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
