package pop3d_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/authlimit"
	"github.com/mailsink/mailsink/internal/bodies"
	"github.com/mailsink/mailsink/internal/mailaccess"
	"github.com/mailsink/mailsink/internal/pop3d"
	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/store"
)

const (
	key      = "pop3-test-key"
	otherKey = "other-account-key"
)

type keys map[string]*store.Account

func (k keys) ByKey(key string) (*store.Account, bool) { a, ok := k[key]; return a, ok }

// door is a POP3 door under test on one store.
type door struct {
	addr, tlsAddr string
	st            store.Store
	account       string
}

// start runs a POP3 door on a fresh store of b, with the account of key
// and another account; edit changes the configuration first.
func start(t *testing.T, b testenv.Backend, edit func(*pop3d.Config)) *door {
	t.Helper()
	st := b.Open(t)
	t.Cleanup(func() { st.Close() })
	acc := &store.Account{ID: "acct-" + testenv.RandomHex(4), Slug: "acme"}
	cfg := pop3d.Config{
		Addr: "127.0.0.1:0", TLSAddr: "127.0.0.1:0", TLS: testenv.TLSConfig(t), AllowInsecureAuth: true,
		MaxMessages: 100, StoreTimeout: 5 * time.Second,
		Access: mailaccess.New(mailaccess.Config{Keys: keys{key: acc, otherKey: {ID: "other"}}, PerAddress: 20, PerAccount: 10}),
	}
	if edit != nil {
		edit(&cfg)
	}
	s := pop3d.New(cfg, st, bodies.New(st, bodies.Config{}), slog.New(slog.DiscardHandler))
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	d := &door{addr: s.Addr().String(), st: st, account: acc.ID}
	if a := s.TLSAddr(); a != nil {
		d.tlsAddr = a.String()
	}
	return d
}

// client speaks POP3 line by line.
type client struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	cl := &client{t: t, c: c, r: bufio.NewReader(c)}
	cl.expect("+OK")
	return cl
}

func (c *client) line() string {
	c.t.Helper()
	l, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read: %v (after %q)", err, l)
	}
	return strings.TrimSuffix(l, "\r\n")
}

func (c *client) expect(prefix string) string {
	c.t.Helper()
	l := c.line()
	if !strings.HasPrefix(l, prefix) {
		c.t.Fatalf("got %q, want %q...", l, prefix)
	}
	return l
}

// cmd sends a command and returns the first line of the answer.
func (c *client) cmd(line string) string {
	c.t.Helper()
	if _, err := io.WriteString(c.c, line+"\r\n"); err != nil {
		c.t.Fatal(err)
	}
	return c.line()
}

// multi reads a multi-line answer's lines up to the terminating dot, as
// sent (dot-stuffing and all), joined with CRLF.
func (c *client) multi() string {
	c.t.Helper()
	var b strings.Builder
	for {
		l, err := c.r.ReadString('\n')
		if err != nil {
			c.t.Fatalf("read: %v", err)
		}
		if l == ".\r\n" {
			return b.String()
		}
		if !strings.HasSuffix(l, "\r\n") {
			c.t.Fatalf("line %q does not end with CRLF", l)
		}
		b.WriteString(l)
	}
}

func (c *client) login(k string) {
	c.t.Helper()
	c.expectCmd("USER anyone", "+OK")
	c.expectCmd("PASS "+k, "+OK")
}

func (c *client) expectCmd(line, prefix string) string {
	c.t.Helper()
	got := c.cmd(line)
	if !strings.HasPrefix(got, prefix) {
		c.t.Fatalf("%s: got %q, want %q...", line, got, prefix)
	}
	return got
}

// withBareLF ends its lines with LF alone and has lines starting with a
// dot, which RETR must stuff.
const withBareLF = "From: a@example.com\nSubject: bare\n\n.hidden line\nsecond\n..two dots\n"

const plain = "From: b@example.com\r\nSubject: plain\r\n\r\nline 1\r\nline 2\r\nline 3\r\n"

// TestSession: a whole session over raw lines, on both stores: what each
// command answers, RETR's bytes (CRLF, dot-stuffed, the size served), TOP,
// DELE and RSET, QUIT's deletes; RETR changes no read state.
func TestSession(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			d := start(t, b, nil)
			older := testenv.PutRaw(t, d.st, d.account, plain)
			newer := testenv.PutRaw(t, d.st, d.account, withBareLF)
			testenv.PutRaw(t, d.st, "other", plain)

			c := dial(t, d.addr)
			capa := c.expectCmd("CAPA", "+OK") + "\r\n" + c.multi()
			for _, want := range []string{"USER", "TOP", "UIDL", "STLS", "RESP-CODES"} {
				if !strings.Contains(capa, "\r\n"+want+"\r\n") {
					t.Errorf("CAPA %q lacks %s", capa, want)
				}
			}
			c.expectCmd("STAT", "-ERR")
			c.expectCmd("PASS "+key, "-ERR")
			c.expectCmd("USER anyone", "+OK")
			c.expectCmd("PASS wrong-key", "-ERR [AUTH]")
			c.login(key)
			c.expectCmd("USER again", "-ERR")
			c.expectCmd("FROB", "-ERR")

			served := strings.ReplaceAll(withBareLF, "\n", "\r\n")
			wantStat := fmt.Sprintf("+OK 2 %d", len(served)+len(plain))
			if got := c.cmd("STAT"); got != wantStat {
				t.Errorf("STAT = %q, want %q", got, wantStat)
			}
			c.expectCmd("LIST", "+OK")
			if got, want := c.multi(), fmt.Sprintf("1 %d\r\n2 %d\r\n", len(served), len(plain)); got != want {
				t.Errorf("LIST = %q, want %q (newest first)", got, want)
			}
			c.expectCmd("UIDL", "+OK")
			if got, want := c.multi(), fmt.Sprintf("1 %s\r\n2 %s\r\n", newer.ID, older.ID); got != want {
				t.Errorf("UIDL = %q, want %q", got, want)
			}
			if got, want := c.cmd("UIDL 2"), "+OK 2 "+older.ID; got != want {
				t.Errorf("UIDL 2 = %q, want %q", got, want)
			}
			if got, want := c.cmd("RETR 1"), fmt.Sprintf("+OK %d octets", len(served)); got != want {
				t.Errorf("RETR 1 = %q, want %q", got, want)
			}
			wantBody := "From: a@example.com\r\nSubject: bare\r\n\r\n..hidden line\r\nsecond\r\n...two dots\r\n"
			if got := c.multi(); got != wantBody {
				t.Errorf("RETR 1 sent %q, want %q", got, wantBody)
			}
			c.expectCmd("TOP 2 1", "+OK")
			if got, want := c.multi(), "From: b@example.com\r\nSubject: plain\r\n\r\nline 1\r\n"; got != want {
				t.Errorf("TOP 2 1 sent %q, want %q", got, want)
			}
			for _, bad := range []string{"RETR 3", "RETR 0", "RETR x", "TOP 1", "DELE 9"} {
				c.expectCmd(bad, "-ERR")
			}
			c.expectCmd("DELE 1", "+OK")
			c.expectCmd("RETR 1", "-ERR")
			c.expectCmd("DELE 1", "-ERR")
			if got, want := c.cmd("STAT"), fmt.Sprintf("+OK 1 %d", len(plain)); got != want {
				t.Errorf("STAT after DELE = %q, want %q", got, want)
			}
			c.expectCmd("RSET", "+OK")
			c.expectCmd("DELE 2", "+OK")
			c.expectCmd("NOOP", "+OK")
			c.expectCmd("QUIT", "+OK 1 message deleted")

			ctx := context.Background()
			if _, err := d.st.GetEmail(ctx, d.account, older.ID); !store.IsCode(err, store.NotFound) {
				t.Errorf("the email of DELE 2 is still there after QUIT: %v", err)
			}
			e, err := d.st.GetEmail(ctx, d.account, newer.ID)
			if err != nil {
				t.Fatalf("the email RSET kept: %v", err)
			}
			if e.Read {
				t.Error("RETR marked the email read")
			}
			if n, _, _ := d.st.AccountStats(ctx, "other"); n != 1 {
				t.Errorf("the other account has %d emails, want its 1", n)
			}
		})
	}
}

// TestBadInput: what a client sends wrong gets -ERR and changes nothing;
// a line past the limit ends the connection; so do many errors before
// login; a session closed without QUIT deletes nothing.
func TestBadInput(t *testing.T) {
	t.Parallel()
	d := start(t, testenv.Backends(t)[0], nil)
	e := testenv.PutRaw(t, d.st, d.account, plain)

	c := dial(t, d.addr)
	c.expectCmd("USER x "+strings.Repeat("y", 600), "-ERR Line too long")
	if _, err := c.r.ReadString('\n'); err == nil {
		t.Error("the connection stays open after a line too long")
	}

	c = dial(t, d.addr)
	for range 4 {
		c.expectCmd("GET / HTTP/1.1", "-ERR")
	}
	c.expectCmd("HELO", "-ERR")
	c.expectCmd("", "-ERR Too many")
	if _, err := c.r.ReadString('\n'); err == nil {
		t.Error("the connection stays open after too many errors")
	}

	c = dial(t, d.addr)
	c.login(key)
	c.expectCmd("DELE 1", "+OK")
	c.c.Close() // no QUIT: nothing is deleted
	c = dial(t, d.addr)
	c.login(key) // once the first session is over, the account is free again
	if got := c.cmd("STAT"); !strings.HasPrefix(got, "+OK 1 ") {
		t.Errorf("STAT after a session that ended without QUIT = %q", got)
	}
	c.expectCmd("QUIT", "+OK")
	if _, err := d.st.GetEmail(context.Background(), d.account, e.ID); err != nil {
		t.Errorf("the email is gone: %v", err)
	}
}

// TestLimits: connections per address and per account, and the wrong-key
// limit shared with the API.
func TestLimits(t *testing.T) {
	t.Parallel()
	guard := authlimit.New(2, time.Minute, false, time.Now)
	d := start(t, testenv.Backends(t)[0], func(c *pop3d.Config) {
		c.Access = mailaccess.New(mailaccess.Config{Keys: keys{key: {ID: "acct"}}, AuthLimiter: guard, PerAddress: 3, PerAccount: 1})
	})
	first := dial(t, d.addr)
	first.login(key)
	second := dial(t, d.addr)
	second.expectCmd("USER x", "+OK")
	second.expectCmd("PASS "+key, "-ERR [IN-USE]")
	third := dial(t, d.addr)
	c, err := net.Dial("tcp", d.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	line, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.HasPrefix(line, "-ERR [SYS/TEMP] Too many connections") {
		t.Errorf("a fourth connection from the address got %q", line)
	}
	for range 2 {
		third.expectCmd("USER x", "+OK")
		third.expectCmd("PASS guess", "-ERR [AUTH]")
	}
	third.expectCmd("USER x", "+OK")
	third.expectCmd("PASS guess", "-ERR [SYS/TEMP]")
	// A key that worked from the address before is not refused.
	third.expectCmd("USER x", "+OK")
	third.expectCmd("PASS "+key, "-ERR [IN-USE]")
}

// TestTLS: STLS and the implicit-TLS listener; without insecure logins,
// USER before TLS is refused and CAPA does not offer it.
func TestTLS(t *testing.T) {
	t.Parallel()
	d := start(t, testenv.Backends(t)[0], func(c *pop3d.Config) { c.AllowInsecureAuth = false })
	testenv.PutRaw(t, d.st, d.account, plain)

	c := dial(t, d.addr)
	c.expectCmd("CAPA", "+OK")
	if capa := c.multi(); strings.Contains(capa, "USER") || !strings.Contains(capa, "STLS") {
		t.Errorf("CAPA before TLS without insecure logins: %q", capa)
	}
	c.expectCmd("USER x", "-ERR")
	c.expectCmd("STLS", "+OK")
	tc := tls.Client(c.c, &tls.Config{InsecureSkipVerify: true})
	c.c, c.r = tc, bufio.NewReader(tc)
	c.expectCmd("STLS", "-ERR")
	c.login(key)
	c.expectCmd("STAT", "+OK 1 ")

	tc, err := tls.Dial("tcp", d.tlsAddr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	s := &client{t: t, c: tc, r: bufio.NewReader(tc)}
	s.expect("+OK")
	s.login(key)
	s.expectCmd("LIST 1", "+OK 1 ")
}

// pythonClient reads every message with poplib, over STLS and over
// implicit TLS, and deletes the first.
const pythonClient = `
import poplib, ssl, sys
host, port, tls_port, key = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
p = poplib.POP3(host, port, timeout=20)
p.stls(context=ctx)
p.user("anyone")
p.pass_(key)
count, size = p.stat()
print("stat", count, size)
for i in range(1, count + 1):
    resp, lines, octets = p.retr(i)
    sys.stdout.buffer.write(b"message %d %d\n" % (i, octets) + b"\r\n".join(lines) + b"\r\n")
print("uidl", p.uidl()[1][0].decode())
p.dele(1)
p.quit()
s = poplib.POP3_SSL(host, tls_port, context=ctx, timeout=20)
s.user("x")
s.pass_(key)
print("after", s.stat()[0])
s.quit()
`

// TestPythonPoplib: Python's poplib reads the messages byte for byte and
// deletes one, on both stores.
func TestPythonPoplib(t *testing.T) {
	t.Parallel()
	testenv.Program(t, "python3")
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			d := start(t, b, nil)
			older := testenv.PutRaw(t, d.st, d.account, plain)
			testenv.PutRaw(t, d.st, d.account, withBareLF)
			_, port, _ := net.SplitHostPort(d.addr)
			_, tlsPort, _ := net.SplitHostPort(d.tlsAddr)
			out := testenv.Run(t, "python3", "-c", pythonClient, "127.0.0.1", port, tlsPort, key)
			served := strings.ReplaceAll(withBareLF, "\n", "\r\n")
			for _, want := range []string{
				fmt.Sprintf("stat 2 %d\n", len(served)+len(plain)),
				// poplib takes the stuffed dots out again
				fmt.Sprintf("message 1 %d\n%s", len(served), served),
				fmt.Sprintf("message 2 %d\n%s", len(plain), plain),
				"after 1\n",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("poplib's output lacks %q:\n%s", want, out)
				}
			}
			if _, err := d.st.GetEmail(context.Background(), d.account, older.ID); err != nil {
				t.Errorf("the older email (message 2) is gone: %v", err)
			}
		})
	}
}

// TestCurl: curl's pop3:// and pop3s:// list and read the messages.
func TestCurl(t *testing.T) {
	t.Parallel()
	d := start(t, testenv.Backends(t)[0], nil)
	testenv.PutRaw(t, d.st, d.account, withBareLF)
	served := strings.ReplaceAll(withBareLF, "\n", "\r\n")
	list := testenv.Run(t, "curl", "-sS", "--max-time", "20", "-u", "anyone:"+key, "pop3://"+d.addr+"/")
	if want := fmt.Sprintf("1 %d\r\n", len(served)); list != want {
		t.Errorf("curl's list: %q, want %q", list, want)
	}
	msg := testenv.Run(t, "curl", "-sS", "--max-time", "20", "-k", "-u", "anyone:"+key, "pop3s://"+d.tlsAddr+"/1")
	if msg != served {
		t.Errorf("curl's pop3s message: %q, want %q", msg, served)
	}
	msg = testenv.Run(t, "curl", "-sS", "--max-time", "20", "-k", "--ssl-reqd", "-u", "anyone:"+key, "pop3://"+d.addr+"/1")
	if msg != served {
		t.Errorf("curl's message over STLS: %q, want %q", msg, served)
	}
}

// TestFetchmail: fetchmail, a real mail client, fetches every message over
// STLS into a local delivery, and deletes them as it goes.
func TestFetchmail(t *testing.T) {
	t.Parallel()
	testenv.Program(t, "fetchmail")
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			d := start(t, b, nil)
			testenv.PutRaw(t, d.st, d.account, plain)
			testenv.PutRaw(t, d.st, d.account, withBareLF)
			mbox := testenv.Fetchmail(t, "POP3", d.addr, "anyone", key)
			for _, want := range []string{"Subject: plain", "line 3", "Subject: bare", ".hidden line", "..two dots"} {
				if !strings.Contains(mbox, want) {
					t.Errorf("fetchmail's delivery lacks %q:\n%s", want, mbox)
				}
			}
			if n, _, _ := d.st.AccountStats(context.Background(), d.account); n != 0 {
				t.Errorf("%d emails left after fetchmail, want 0 (it deletes what it fetched)", n)
			}
		})
	}
}

// TestSizeOfLastLineWithoutLineEnd: a message whose last line has no line
// end (possible through the API) is served with CRLF after it, before the
// terminating line; LIST, STAT and RETR count those bytes too, so that
// the size told is the size sent.
func TestSizeOfLastLineWithoutLineEnd(t *testing.T) {
	t.Parallel()
	d := start(t, testenv.Backends(t)[0], nil)
	for _, tc := range []struct{ raw, served string }{
		{"Subject: a\r\n\r\nno line end", "Subject: a\r\n\r\nno line end\r\n"},
		{"Subject: b\n\nends with CR\r", "Subject: b\r\n\r\nends with CR\r\n"},
	} {
		testenv.PutRaw(t, d.st, d.account, tc.raw)
		c := dial(t, d.addr)
		c.login(key)
		if got, want := c.cmd("STAT"), fmt.Sprintf("+OK 1 %d", len(tc.served)); got != want {
			t.Errorf("%q: STAT = %q, want %q", tc.raw, got, want)
		}
		if got, want := c.cmd("LIST 1"), fmt.Sprintf("+OK 1 %d", len(tc.served)); got != want {
			t.Errorf("%q: LIST 1 = %q, want %q", tc.raw, got, want)
		}
		if got, want := c.cmd("RETR 1"), fmt.Sprintf("+OK %d octets", len(tc.served)); got != want {
			t.Errorf("%q: RETR 1 = %q, want %q", tc.raw, got, want)
		}
		if got := c.multi(); got != tc.served {
			t.Errorf("%q: RETR 1 sent %q, want %q", tc.raw, got, tc.served)
		}
		// The next case finds the mailbox empty again.
		c.expectCmd("DELE 1", "+OK")
		c.expectCmd("QUIT", "+OK")
	}
}
