package smtpd

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emersion/go-smtp"
)

// goSMTPData is go-smtp v0.25.1's DATA reader (its data.go) and line-length
// reader (lengthlimit_reader.go), byte by byte as there: the oracle fastData
// must agree with. It returns the message, how many input bytes the message
// took (len(in) when it does not end), whether it ended, and the line limit
// error, if any, at the first chunk that breaks it.
func goSMTPData(in []byte, chunks []int, lineLimit int) (out []byte, used int, ended bool, err error) {
	state, line := stateBeginLine, 1
	for _, size := range chunks {
		chunk := in[:size]
		in = in[size:]
		for _, c := range chunk { // lineLimitReader sees the whole chunk first
			if c == '\n' {
				line = 0
			}
			line++
			if line > lineLimit {
				return out, used, false, smtp.ErrTooLongLine
			}
		}
		for _, c := range chunk {
			used++
			switch state {
			case stateBeginLine:
				if c == '.' {
					state = stateDot
					continue
				}
				if c == '\r' {
					state = stateCR
					break
				}
				state = stateData
			case stateDot:
				if c == '\r' {
					state = stateDotCR
					continue
				}
				state = stateData
			case stateDotCR:
				if c == '\n' {
					return out, used, true, nil
				}
				state = stateData
			case stateCR:
				if c == '\n' {
					state = stateBeginLine
					break
				}
				state = stateData
			case stateData:
				if c == '\r' {
					state = stateCR
				}
			}
			out = append(out, c)
		}
	}
	return out, used, false, nil
}

// fastDataOf runs fastData's scanning over in, cut into chunks as a socket
// might deliver it.
func fastDataOf(in []byte, chunks []int, lineLimit int) (out []byte, used int, ended bool, err error) {
	f := &fastData{line: 1, lineLimit: lineLimit}
	for _, size := range chunks {
		chunk := bytes.Clone(in[:size])
		in = in[size:]
		if f.countLines(chunk) >= 0 {
			return out, used, false, smtp.ErrTooLongLine
		}
		w, u := f.scan(chunk)
		out = append(out, chunk[:w]...)
		used += u
		if f.state == stateEOF {
			return out, used, true, nil
		}
	}
	return out, used, false, nil
}

// cuts splits n bytes into chunks whose sizes come from seed.
func cuts(n int, seed uint64) []int {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []int
	for n > 0 {
		size := min(n, 1+r.IntN(7))
		if r.IntN(4) == 0 {
			size = min(n, 1+r.IntN(4096))
		}
		out = append(out, size)
		n -= size
	}
	return out
}

func checkAgainstGoSMTP(t *testing.T, in []byte, seed uint64, lineLimit int) {
	t.Helper()
	chunks := cuts(len(in), seed)
	wantOut, wantUsed, wantEnded, wantErr := goSMTPData(in, chunks, lineLimit)
	out, used, ended, err := fastDataOf(in, chunks, lineLimit)
	if !errors.Is(err, wantErr) || (wantErr == nil && (ended != wantEnded || used != wantUsed || !bytes.Equal(out, wantOut))) {
		t.Fatalf("input %q in chunks %v:\nfastData: %q, used %d, ended %v, err %v\ngo-smtp:  %q, used %d, ended %v, err %v",
			in, chunks, out, used, ended, err, wantOut, wantUsed, wantEnded, wantErr)
	}
}

// tricky holds the sequences where go-smtp's reader does something
// particular: dot-stuffing, bare CRs and LFs, a dot and a bare CR that go
// missing, an end marker that is not one.
var tricky = []string{
	"", ".\r\n", "a\r\n.\r\n", "..\r\n.\r\n", ".x\r\n.\r\n", ".\rx\r\n.\r\n", ".\r\r\n.\r\n",
	"a\r\r\n.\r\n", "a\n.\r\n", "a\r\n.\n", "a\r\n.\r\r\n.\r\n", "\r\n.\r\n", "a\r\n..\r\n.\r\n",
	"a\r\n.\r\nQUIT\r\n", "x\r\n.\r\nMAIL FROM:<a@b>\r\nRCPT TO:<c@d>\r\nDATA\r\n", "\r\r\r\n.\r\n", "a\r", "a\r\n.",
	"a\r\n.\r", "no end at all",
}

func TestFastDataMatchesGoSMTP(t *testing.T) {
	for _, in := range tricky {
		for seed := range uint64(50) {
			checkAgainstGoSMTP(t, []byte(in), seed, 1<<20)
		}
	}
	// Lines at and past a small limit.
	for n := range 12 {
		in := strings.Repeat("y", n) + "\r\n" + strings.Repeat("z", 12-n) + "\r\n.\r\n"
		for seed := range uint64(20) {
			checkAgainstGoSMTP(t, []byte(in), seed, 8)
		}
	}
}

func FuzzFastData(f *testing.F) {
	for _, in := range tricky {
		f.Add([]byte(in), uint64(1), uint16(0))
	}
	files, _ := filepath.Glob("../internal/mailparse/testdata/corpus/*/*.eml")
	for i, name := range files {
		if raw, err := os.ReadFile(name); err == nil && i%4 == 0 {
			f.Add(append(raw, "\r\n.\r\n"...), uint64(i), uint16(0))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte, seed uint64, limit uint16) {
		lineLimit := 1 << 20
		if limit > 0 {
			lineLimit = int(limit)
		}
		checkAgainstGoSMTP(t, in, seed, lineLimit)
	})
}

// TestFastDataReadEOF checks that a client that leaves mid-message is a
// failed transfer, not the end of a message.
func TestFastDataReadEOF(t *testing.T) {
	server, client := netPipe(t)
	c := &conn{Conn: server}
	f := newFastData(c, io.MultiReader(), 1<<20)
	f.first, f.fast = false, true
	go func() {
		client.Write([]byte("Subject: cut\r\n\r\nhalf a mess"))
		client.Close()
	}()
	got, err := io.ReadAll(f)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read %q, %v; want io.ErrUnexpectedEOF", got, err)
	}
}

func netPipe(t *testing.T) (server, client net.Conn) {
	server, client = net.Pipe()
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// readerConn is a net.Conn whose reads come from r, as large as asked.
type readerConn struct {
	net.Conn
	r io.Reader
}

func (c *readerConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// TestFastDataLongLineAfterEnd: go-smtp's reader reads at most a bufio
// buffer (4 KiB) past the end of a message, so a long line after ".\r\n" never
// fails the message: go-smtp stores it and refuses the line as a command.
// fastData may read far more past the end (readMessage's room after a large
// SIZE); the line there must not fail the message either.
func TestFastDataLongLineAfterEnd(t *testing.T) {
	msg := "Subject: x\r\n\r\nbody\r\n"
	after := strings.Repeat("A", maxLineLength+10)
	c := &conn{Conn: &readerConn{r: strings.NewReader(msg + ".\r\n" + after)}}
	f := newFastData(c, nil, maxLineLength)
	f.first, f.fast = false, true
	p := make([]byte, 4<<20)
	n, err := f.Read(p)
	if err != io.EOF || string(p[:n]) != msg {
		t.Fatalf("read %.40q, %v; want the message and io.EOF", p[:n], err)
	}
	f.handBack()
	if got := string(c.unread); got != ".\r\n"+after {
		t.Fatalf("given back %d bytes, want %d", len(got), len(after)+3)
	}
}

// TestFastDataLongLineWithin: a line past the limit within the message fails
// it, whatever follows in the same read.
func TestFastDataLongLineWithin(t *testing.T) {
	in := "a" + strings.Repeat("A", maxLineLength+10) + "\r\n.\r\nQUIT\r\n"
	c := &conn{Conn: &readerConn{r: strings.NewReader(in)}}
	f := newFastData(c, nil, maxLineLength)
	f.first, f.fast = false, true
	if _, err := f.Read(make([]byte, 4<<20)); !errors.Is(err, smtp.ErrTooLongLine) {
		t.Fatalf("err %v, want ErrTooLongLine", err)
	}
}
