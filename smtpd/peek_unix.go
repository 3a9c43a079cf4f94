//go:build unix

package smtpd

import "syscall"

// socketEmpty reports whether nothing waits to be read in the socket fd,
// peeking without consuming or waiting.
func socketEmpty(fd uintptr) bool {
	var b [1]byte
	_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return err == syscall.EAGAIN
}
