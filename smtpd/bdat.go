package smtpd

import (
	"io"
	"time"
)

// awaitBDATGoroutine waits until go-smtp's goroutine for a BDAT transaction
// whose Data read from pr has finished with it.
//
// go-smtp v0.25.1 runs Data for BDAT in a goroutine that, after Data
// returns, sends Data's result on the connection's current result channel
// and then closes pr. When the transaction was reset while Data read (RSET
// between chunks, the client gone), nothing orders that send after the next
// transaction's first BDAT, which replaces the channel: the race detector
// reports it with any Data, and the next transaction could get this one's
// result. Mail calls this before a new transaction starts: once pr is
// closed, reading it fails with io.ErrClosedPipe, and the pipe's lock orders
// the goroutine's last steps before the new transaction. Data returns as
// soon as its transaction ends, so the wait is a few microseconds; it is
// bounded all the same. (Data records pr before its first read, and go-smtp
// waits for that read before it answers a chunk, so Mail always knows pr;
// only a first chunk of 0 bytes reset before the goroutine runs escapes.)
func awaitBDATGoroutine(pr *io.PipeReader) {
	deadline := time.Now().Add(time.Second)
	for {
		// The write end is closed once the transaction ended, so this
		// read never blocks.
		if _, err := pr.Read(nil); err == io.ErrClosedPipe || time.Now().After(deadline) {
			return
		}
		time.Sleep(20 * time.Microsecond)
	}
}
