package smtpd

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/clientaddr"
)

// recordConn records each Write it is given; Read gives readErr.
type recordConn struct {
	net.Conn
	writes  []string
	readErr error
	closed  bool
}

func (r *recordConn) Write(b []byte) (int, error) {
	r.writes = append(r.writes, string(b))
	return len(b), nil
}

func (r *recordConn) Read([]byte) (int, error) { return 0, r.readErr }

func (r *recordConn) Close() error {
	r.closed = true
	return nil
}

func newTestConn(rec *recordConn) *conn {
	return &conn{Conn: rec, set: newConnSet(ConnectionLimits{}, false, 0)}
}

// Replies reach the connection unchanged, in one write when the server reads
// next; what is written after the last read goes out on Close.
func TestConnHoldsRepliesUntilTheNextRead(t *testing.T) {
	rec := &recordConn{readErr: io.EOF}
	c := newTestConn(rec)
	write := func(lines ...string) {
		t.Helper()
		for _, line := range lines {
			if n, err := c.Write([]byte(line)); n != len(line) || err != nil {
				t.Fatalf("Write(%q) = %d, %v; want %d, nil", line, n, err, len(line))
			}
		}
	}
	write("250-mailsink\r\n", "250-SIZE\r\n", "250 SMTPUTF8\r\n")
	if len(rec.writes) != 0 {
		t.Fatalf("replies written before the server reads: %q", rec.writes)
	}
	rec.readErr = nil
	c.Read(make([]byte, 10))
	c.Read(make([]byte, 10)) // nothing held: no empty write
	write("250 2.0.0 Roger\r\n", "354 Go ahead\r\n")
	c.Read(make([]byte, 10))
	write("221 Bye\r\n")
	c.Close()
	want := []string{"250-mailsink\r\n250-SIZE\r\n250 SMTPUTF8\r\n", "250 2.0.0 Roger\r\n354 Go ahead\r\n", "221 Bye\r\n"}
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

// After a failed read, or once the session hangs up, the reply held is
// written and every read ends with net.ErrClosed: the rest of a message is
// never read as commands.
func TestConnEndsReadingAfterAFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(c *conn, rec *recordConn)
	}{
		{"failed read", func(c *conn, rec *recordConn) {
			rec.readErr = errors.New("i/o timeout")
			if _, err := c.Read(make([]byte, 1)); err != rec.readErr {
				t.Fatalf("first read: %v, want the connection's error", err)
			}
			rec.readErr = nil
		}},
		{"hang-up", func(c *conn, _ *recordConn) { c.hangUp() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordConn{}
			c := newTestConn(rec)
			tc.end(c, rec)
			c.Write([]byte("421 4.4.2 Message transfer timed out\r\n"))
			for range 2 {
				if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
					t.Errorf("read: %v, want net.ErrClosed", err)
				}
			}
			if len(rec.writes) != 1 || rec.writes[0] != "421 4.4.2 Message transfer timed out\r\n" {
				t.Errorf("writes %q, want the reply once", rec.writes)
			}
		})
	}
}

// peerConn is a connection from addr.
type peerConn struct {
	net.Conn
	addr net.Addr
}

func (p peerConn) RemoteAddr() net.Addr { return p.addr }

// The client's address is what formatting the peer's address and parsing
// it again gave, for every form of TCP address; its network is its /24 or
// /64.
func TestConnAddrIsThePeersHost(t *testing.T) {
	for _, addr := range []net.Addr{
		&net.TCPAddr{IP: net.IPv4(192, 0, 2, 7).To4(), Port: 25},
		&net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 25}, // 16 bytes, IPv4-mapped
		&net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 25},
		&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 25, Zone: "eth0"},
		&net.UnixAddr{Name: "/run/mailsink.sock", Net: "unix"},
	} {
		c := &conn{Conn: peerConn{addr: addr}}
		ip := c.setAddr()
		want := clientaddr.Host(addr.String())
		if c.addr != want {
			t.Errorf("%v: addr %q, want %q", addr, c.addr, want)
		}
		wantNet := ""
		if ip, err := netip.ParseAddr(want); err == nil {
			wantNet = map[bool]string{true: "/24", false: "/64"}[ip.Unmap().Is4()]
		}
		if got := c.network.String(); wantNet != "" && !strings.HasSuffix(got, wantNet) || wantNet == "" && c.network.IsValid() {
			t.Errorf("%v: network %v, want a %s", addr, c.network, wantNet)
		}
		if wantIP, err := netip.ParseAddr(want); ip != wantIP.Unmap() || (err == nil) != ip.IsValid() {
			t.Errorf("%v: ip %v, want %v", addr, ip, wantIP)
		}
	}
}

// go-smtp closes a connection twice after QUIT: the second Close neither
// writes nor closes again, and the connection is counted out once.
func TestConnClosesOnce(t *testing.T) {
	rec := &recordConn{}
	c := newTestConn(rec)
	c.ip = netip.MustParseAddr("192.0.2.7")
	c.network = network(c.ip)
	if reply := c.set.add(c); reply != "" {
		t.Fatalf("add: %q", reply)
	}
	c.Write([]byte("221 2.0.0 Bye\r\n"))
	if err := c.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := c.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second Close: %v, want net.ErrClosed", err)
	}
	if err := c.SetReadDeadline(time.Now()); !errors.Is(err, net.ErrClosed) {
		t.Errorf("SetReadDeadline after Close: %v, want net.ErrClosed", err)
	}
	if len(rec.writes) != 1 || !rec.closed {
		t.Errorf("writes %q, closed %v; want the reply once and closed", rec.writes, rec.closed)
	}
	if len(c.set.conns) != 0 || len(c.set.byAddr) != 0 || len(c.set.byNet) != 0 {
		t.Errorf("connections %d, by address %v, by network %v after Close; want none", len(c.set.conns), c.set.byAddr, c.set.byNet)
	}
}

// Each connection counts for its address and its network (IPv4 /24, IPv6
// /64) as well as in total; loopback clients meet only the total unless
// LimitLoopback.
func TestConnectionLimits(t *testing.T) {
	limits := ConnectionLimits{Total: 6, PerAddress: 2, PerNetwork: 3}
	for _, tt := range []struct {
		name          string
		limits        ConnectionLimits
		limitLoopback bool
		open          []string // addresses already connected
		from          string
		want          string // the refusal, or "" when admitted
	}{
		{"a new address", limits, false, []string{"192.0.2.1"}, "192.0.2.2", ""},
		{"an address full", limits, false, []string{"192.0.2.1", "192.0.2.1"}, "192.0.2.1", "your address"},
		{"a network full", limits, false, []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"}, "192.0.2.4", "your network"},
		{"the next network", limits, false, []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"}, "192.0.3.1", ""},
		{"all full", limits, false, []string{"192.0.2.1", "192.0.2.2", "198.51.100.1", "198.51.100.2", "203.0.113.1", "203.0.113.2"}, "192.0.3.1", "Too many connections, try"},
		{"an IPv6 /64 full", limits, false, []string{"2001:db8::1", "2001:db8::2", "2001:db8::3"}, "2001:db8::ffff:4", "your network"},
		{"another IPv6 /64", limits, false, []string{"2001:db8::1", "2001:db8::2", "2001:db8::3"}, "2001:db8:0:1::1", ""},
		{"loopback meets the total only", limits, false, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.2"}, "127.0.0.1", ""},
		{"loopback full in total", limits, false, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.1", "::1", "::1"}, "127.0.0.1", "Too many connections, try"},
		{"loopback limited on demand", limits, true, []string{"127.0.0.1", "127.0.0.1"}, "127.0.0.1", "your address"},
		{"no per-client bounds", ConnectionLimits{Total: 6}, false, []string{"192.0.2.1", "192.0.2.1", "192.0.2.1"}, "192.0.2.1", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			set := newConnSet(tt.limits, tt.limitLoopback, 0)
			connFrom := func(addr string) *conn {
				ip := netip.MustParseAddr(addr)
				c := &conn{Conn: peerConn{addr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, 25))}, set: set}
				c.setAddr()
				return c
			}
			var open []*conn
			for _, a := range tt.open {
				c := connFrom(a)
				if reply := set.add(c); reply != "" {
					t.Fatalf("setting up, %s: %q", a, reply)
				}
				open = append(open, c)
			}
			c := connFrom(tt.from)
			got := set.add(c)
			if tt.want == "" && got != "" || tt.want != "" && (!strings.HasPrefix(got, "421 4.7.0 ") || !strings.Contains(got, tt.want)) {
				t.Fatalf("a connection from %s: %q, want %q", tt.from, got, tt.want)
			}
			if got != "" {
				// The last connection counts in the limit that refused
				// (each case is so): once it closes, there is room.
				set.remove(open[len(open)-1])
				if reply := set.add(c); reply != "" {
					t.Errorf("after a close: %q", reply)
				}
			}
		})
	}
}
