package smtpd

// Reading a DATA message from the socket directly, on plaintext connections.
//
// go-smtp v0.25.1 reads DATA's message one bufio ReadByte at a time (undoing
// the dot-stuffing of RFC 5321, 4.5.2) under a reader that counts line
// lengths a byte at a time too: two thirds of the CPU mailsink spends on a
// 100 KB message, and a tenth of a 2 KB one (docs/benchmarks.md). fastData
// reads the message from the socket itself, a buffer at a time, and scans it
// with bytes.IndexByte, following go-smtp's reader exactly, quirks included,
// so that a message is stored the same whichever reads it
// (TestFastDataMatchesGoSMTP).
//
// It takes over only where nothing of the message has been read yet: the
// first read of go-smtp's reader in Data finds go-smtp's buffer empty and
// asks the connection (conn.Read), which, armed, answers errHandOver instead
// of reading. Whether go-smtp's reader had consumed anything first shows in
// the last byte the connection gave it: only the end of the DATA command
// line, a '\n', leaves it at the start of the message (see handOver). Anything
// else, and always under TLS and for BDAT, go-smtp's reader reads on.
//
// Once the message is read, go-smtp still drains its own reader, which never
// saw the message: handBack gives the connection back, to be read before the
// socket, what makes that reader end where fastData did (".\r\n" after the
// end of the message), then whatever fastData read past the end (pipelined
// commands).

import (
	"bytes"
	"errors"
	"io"
	"slices"

	"github.com/emersion/go-smtp"
)

// errHandOver is what an armed conn's Read answers.
var errHandOver = errors.New("smtpd: the message is read from the socket directly")

// The states of go-smtp's DATA reader (its data.go), which fastData shares.
const (
	stateBeginLine = iota // start of a line, and of the message
	stateDot              // a '.' at the start of a line (dropped)
	stateDotCR            // ".\r" at the start of a line (dropped)
	stateCR               // after a '\r'
	stateData             // within a line
	stateEOF              // after ".\r\n": the end of the message
)

// fastData reads one DATA message: through go-smtp's reader r until it hands
// over, then from c. It is an io.Reader for Server.readMessage.
type fastData struct {
	c     *conn
	r     io.Reader // go-smtp's reader
	first bool      // the first Read has not happened
	fast  bool      // reading from c
	state int
	// line is go-smtp's count of the current line's bytes: it refuses a
	// line past lineLimit (ErrTooLongLine). After the DATA line it is 1.
	line, lineLimit int
	rest            []byte // read past the end of the message
}

// newFastData returns the reader of a DATA message on c, whose go-smtp reader
// is r, with go-smtp's line limit.
func newFastData(c *conn, r io.Reader, lineLimit int) *fastData {
	return &fastData{c: c, r: r, first: true, line: 1, lineLimit: lineLimit}
}

func (f *fastData) Read(p []byte) (int, error) {
	if f.first {
		f.first = false
		if n, ok, err := f.handOver(p); !ok {
			return n, err
		}
	}
	if !f.fast {
		return f.r.Read(p)
	}
	if f.state == stateEOF {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, err := f.c.Read(p)
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // the client left mid-message, as go-smtp's reader answers
		}
		if n > 0 {
			// go-smtp reads at most a bufio buffer past the end of a
			// message, so a line past the limit there never fails the
			// message: only a line within it does.
			over := f.countLines(p[:n])
			w, used := f.scan(p[:n])
			if over >= 0 && (f.state != stateEOF || over < used) {
				return 0, smtp.ErrTooLongLine
			}
			if f.state == stateEOF {
				f.rest = slices.Clone(p[used:n])
				return w, io.EOF
			}
			if w > 0 || err != nil {
				return w, err
			}
			continue // only dropped dots: read on
		}
		return 0, err
	}
}

// handOver makes the first read: it arms the connection and reads through
// go-smtp's reader. ok is true when go-smtp's reader handed over at the start
// of the message: nothing read, and the last byte it was given the end of a
// line. Otherwise go-smtp's reader goes on, and n and err are what it read.
func (f *fastData) handOver(p []byte) (n int, ok bool, err error) {
	f.c.armed = true
	n, err = f.r.Read(p)
	f.c.armed = false
	if err != errHandOver {
		return n, false, err
	}
	if n > 0 || f.c.last != '\n' {
		return n, false, nil // the connection's next read is the socket's
	}
	f.fast = true
	return 0, true, nil
}

// countLines counts raw bytes into the current line as go-smtp does: a
// '\n' counts as the first byte of the next line. It returns the index of
// the first byte that takes a line past the limit, or -1.
func (f *fastData) countLines(raw []byte) int {
	over, base := -1, 0
	for {
		i := bytes.IndexByte(raw, '\n')
		if i < 0 {
			if over < 0 && f.line+len(raw) > f.lineLimit {
				over = base + f.lineLimit - f.line
			}
			f.line += len(raw)
			return over
		}
		if over < 0 && f.line+i > f.lineLimit {
			over = base + f.lineLimit - f.line
		}
		f.line = 1
		raw = raw[i+1:]
		base += i + 1
	}
}

// scan undoes the dot-stuffing of b in place, as go-smtp's reader does,
// until the end of the message. It returns the length of the message's bytes
// now at the start of b, and how many bytes of b it used: all, unless the
// message ended within b.
func (f *fastData) scan(b []byte) (w, used int) {
	i := 0
	for i < len(b) {
		if f.state == stateData {
			j := bytes.IndexByte(b[i:], '\r')
			end := len(b)
			if j >= 0 {
				end = i + j + 1
				f.state = stateCR
			}
			if w != i {
				copy(b[w:], b[i:end])
			}
			w += end - i
			i = end
			continue
		}
		c := b[i]
		i++
		switch f.state {
		case stateBeginLine:
			if c == '.' {
				f.state = stateDot
				continue
			}
			f.state = stateData
			if c == '\r' {
				f.state = stateCR
			}
		case stateDot:
			if c == '\r' {
				f.state = stateDotCR
				continue
			}
			f.state = stateData
		case stateDotCR:
			if c == '\n' {
				f.state = stateEOF
				return w, i
			}
			f.state = stateData
		case stateCR:
			f.state = stateData
			if c == '\n' {
				f.state = stateBeginLine
			}
		}
		b[w] = c
		w++
	}
	return w, i
}

// handBack ends the message's reading: when fastData read from the
// connection, it gives the connection back, ahead of what it holds, the bytes
// that bring go-smtp's reader (left at the start of the message) to where
// fastData stopped (catchUp), then what fastData read past the end of the
// message.
func (f *fastData) handBack() {
	if !f.fast {
		return
	}
	c := f.c
	catch := f.catchUp()
	c.mu.Lock()
	if len(f.rest) == 0 && len(c.unread) == 0 {
		c.unread = catch // only ever read from
	} else {
		c.unread = slices.Concat(catch, f.rest, c.unread)
	}
	c.mu.Unlock()
	f.fast, f.rest = false, nil
}

// Bytes that take go-smtp's reader from the start of the message to a state,
// without ending the message but for endOfData.
var (
	endOfData = []byte(".\r\n")
	dot       = []byte(".")
	dotCR     = []byte(".\r")
)

// catchUp returns the bytes that take go-smtp's reader from the start of the
// message to fastData's state, and its line count to fastData's: after an
// error (errTooLarge) go-smtp reads the rest of the message itself, and must
// refuse a line past its limit as it would have without fastData. Within a
// line, a '\n' (which keeps go-smtp's reader within a line, and starts its
// count at 1) and as many bytes more as the line holds, up to one past the
// limit.
func (f *fastData) catchUp() []byte {
	line := min(f.line, f.lineLimit+1) // enough to be past the limit
	switch f.state {
	case stateEOF:
		return endOfData
	case stateDot:
		return dot
	case stateDotCR:
		return dotCR
	case stateData:
		return slices.Concat([]byte("\n"), bytes.Repeat([]byte("x"), line-1))
	case stateCR:
		return slices.Concat([]byte("\n"), bytes.Repeat([]byte("x"), line-2), []byte("\r"))
	}
	return nil // stateBeginLine: where go-smtp's reader is
}
