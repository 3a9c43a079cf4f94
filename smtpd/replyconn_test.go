package smtpd

import (
	"io"
	"net"
	"testing"
)

// recordConn records each Write it is given; Read reports EOF.
type recordConn struct {
	net.Conn
	writes []string
	closed bool
}

func (r *recordConn) Write(b []byte) (int, error) {
	r.writes = append(r.writes, string(b))
	return len(b), nil
}

func (r *recordConn) Read([]byte) (int, error) { return 0, io.EOF }

func (r *recordConn) Close() error {
	r.closed = true
	return nil
}

// Replies reach the connection in one write when the server reads next,
// with the SIZE line rewritten; what is written after the last read goes
// out on Close.
func TestReplyConnWrites(t *testing.T) {
	rec := &recordConn{}
	c := &replyConn{Conn: rec, from: []byte("SIZE 101\r\n"), to: []byte("SIZE 100\r\n")}
	write := func(lines ...string) {
		t.Helper()
		for _, line := range lines {
			if n, err := c.Write([]byte(line)); n != len(line) || err != nil {
				t.Fatalf("Write(%q) = %d, %v; want %d, nil", line, n, err, len(line))
			}
		}
	}
	write("250-mailsink\r\n", "250-SIZE 101\r\n", "250 SMTPUTF8\r\n")
	if len(rec.writes) != 0 {
		t.Fatalf("replies written before the server reads: %q", rec.writes)
	}
	c.Read(make([]byte, 10))
	c.Read(make([]byte, 10)) // nothing held: no empty write
	write("250 2.0.0 Roger\r\n", "250 2.0.0 I'll make sure\r\n", "354 Go ahead\r\n")
	c.Read(make([]byte, 10))
	write("421 4.4.2 Bye\r\n")
	c.Close()
	want := []string{
		"250-mailsink\r\n250-SIZE 100\r\n250 SMTPUTF8\r\n",
		"250 2.0.0 Roger\r\n250 2.0.0 I'll make sure\r\n354 Go ahead\r\n",
		"421 4.4.2 Bye\r\n",
	}
	if len(rec.writes) != len(want) {
		t.Fatalf("connection got writes %q, want %q", rec.writes, want)
	}
	for i := range want {
		if rec.writes[i] != want[i] {
			t.Errorf("write %d = %q, want %q", i, rec.writes[i], want[i])
		}
	}
	if !rec.closed {
		t.Error("Close did not close the connection")
	}
}
