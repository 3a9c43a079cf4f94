package smtpd

import "testing"

// deep uses about n KB of stack below its caller, as a transaction's
// store call does (Redis commands, JSON encoding).
//
//go:noinline
func deep(n int) byte {
	var frame [1 << 10]byte
	if n == 0 {
		return frame[0]
	}
	frame[n%len(frame)] = byte(n)
	return deep(n-1) + frame[(n*7)%len(frame)]
}

// BenchmarkReserveStack runs a transaction-deep call on a new goroutine,
// as go-smtp serves a new connection, with and without reserveStack first:
// the reservation is worth keeping only if it makes this cheaper.
func BenchmarkReserveStack(b *testing.B) {
	for _, bm := range []struct {
		name    string
		reserve bool
	}{{"without", false}, {"with", true}} {
		b.Run(bm.name, func(b *testing.B) {
			done := make(chan byte)
			for b.Loop() {
				go func() {
					if bm.reserve {
						reserveStack(false)
					}
					done <- deep(20)
				}()
				<-done
			}
		})
	}
}
