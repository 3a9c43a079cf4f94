package mailparse

import (
	"bufio"
	"bytes"
	"io"
)

// fieldLimiter passes on the body of a multipart entity, but for the header
// fields of its parts past the first MaxHeaderFields of each part, which it
// leaves out (setting *cut). go-message's multipart reader reads a part's
// whole header into memory, several times its size in maps and strings; a
// part of a 25 MB message with a million tiny fields would otherwise cost
// gigabytes. It reads line by line, a long line in pieces, so it holds at
// most one buffer whatever the input.
type fieldLimiter struct {
	br    *bufio.Reader
	delim []byte // "--" + the boundary
	cut   *bool

	inHeader bool // after a delimiter line, before the empty line
	fields   int  // fields of the current part's header so far
	keep     bool // the current line (and its continuations) is passed on
	midLine  bool // the last piece read did not end its line
	pending  []byte
	err      error
}

func newFieldLimiter(r io.Reader, boundary string, cut *bool) io.Reader {
	delim := []byte("--" + boundary)
	return &fieldLimiter{br: bufio.NewReaderSize(r, max(4096, len(delim)+2)), delim: delim, cut: cut, keep: true}
}

func (f *fieldLimiter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		lineStart := !f.midLine
		piece, err := f.br.ReadSlice('\n')
		f.midLine = err == bufio.ErrBufferFull
		if err != nil && err != bufio.ErrBufferFull {
			f.err = err
		}
		if lineStart && len(piece) > 0 {
			f.startLine(piece)
		}
		if f.keep {
			f.pending = piece
		}
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// startLine decides whether the line that starts with piece is passed on.
// piece is the whole line when it ends in '\n', else at least as long as
// the delimiter line can be.
func (f *fieldLimiter) startLine(piece []byte) {
	switch {
	case f.delimiter(piece):
		f.inHeader, f.fields, f.keep = true, 0, true
	case !f.inHeader:
		f.keep = true
	case len(bytes.TrimRight(piece, "\r\n")) == 0:
		f.inHeader, f.keep = false, true // the end of the part's header
	case piece[0] == ' ' || piece[0] == '\t':
		// A continuation goes with its field.
	default:
		f.fields++
		f.keep = f.fields <= MaxHeaderFields
		if !f.keep {
			*f.cut = true
		}
	}
}

// delimiter reports whether the line that starts with piece is a boundary
// delimiter line: the delimiter, maybe "--", then only white space.
func (f *fieldLimiter) delimiter(piece []byte) bool {
	rest, ok := bytes.CutPrefix(piece, f.delim)
	if !ok {
		return false
	}
	rest = bytes.TrimPrefix(rest, []byte("--"))
	return len(bytes.Trim(rest, " \t\r\n")) == 0 && bytes.HasSuffix(piece, []byte("\n")) || len(rest) == 0
}
