package smtpd

import (
	"net"
	"testing"
)

// recordConn records each Write it is given.
type recordConn struct {
	net.Conn
	writes []string
}

func (r *recordConn) Write(b []byte) (int, error) {
	r.writes = append(r.writes, string(b))
	return len(b), nil
}

// A multi-line reply reaches the connection in one write, with the SIZE
// line rewritten; single-line replies go out as they come.
func TestSizeConnWrites(t *testing.T) {
	rec := &recordConn{}
	c := &sizeConn{Conn: rec, from: []byte("SIZE 101\r\n"), to: []byte("SIZE 100\r\n")}
	for _, line := range []string{"250-mailsink\r\n", "250-SIZE 101\r\n", "250 SMTPUTF8\r\n", "354 Go ahead\r\n"} {
		if n, err := c.Write([]byte(line)); n != len(line) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want %d, nil", line, n, err, len(line))
		}
	}
	want := []string{"250-mailsink\r\n250-SIZE 100\r\n250 SMTPUTF8\r\n", "354 Go ahead\r\n"}
	if len(rec.writes) != len(want) || rec.writes[0] != want[0] || rec.writes[1] != want[1] {
		t.Errorf("connection got writes %q, want %q", rec.writes, want)
	}
}
