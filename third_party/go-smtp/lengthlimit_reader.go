package smtp

import (
	"bytes"
	"errors"
	"io"
)

var ErrTooLongLine = errors.New("smtp: too long a line in input stream")

// lineLimitReader reads from the underlying Reader but restricts
// line length of lines in input stream to a certain length.
//
// If line length exceeds the limit - Read returns ErrTooLongLine
type lineLimitReader struct {
	R         io.Reader
	LineLimit int

	curLineLength int
}

func (r *lineLimitReader) Read(b []byte) (int, error) {
	if r.curLineLength > r.LineLimit && r.LineLimit > 0 {
		return 0, ErrTooLongLine
	}

	n, err := r.R.Read(b)
	if err != nil {
		return n, err
	}

	if r.LineLimit == 0 {
		return n, nil
	}

	// mailsink patch: find the line ends with bytes.IndexByte instead of
	// looking at each byte; the count is the same as before (a line's
	// length includes the LF that ended the line before it).
	rest := b[:n]
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			r.curLineLength += len(rest)
			break
		}
		if r.curLineLength+i > r.LineLimit {
			r.curLineLength += i // the error sticks
			return 0, ErrTooLongLine
		}
		rest = rest[i+1:]
		r.curLineLength = 1
	}
	if r.curLineLength > r.LineLimit {
		return 0, ErrTooLongLine
	}

	return n, nil
}
