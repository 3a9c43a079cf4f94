//go:build !unix

package smtpd

// socketEmpty reports false where the socket cannot be peeked at without
// waiting: the connection is not known to be quiet.
func socketEmpty(uintptr) bool { return false }
