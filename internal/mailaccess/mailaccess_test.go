package mailaccess

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/authlimit"
	"github.com/mailsink/mailsink/store"
)

func TestCRLF(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"a\r\nb\r\n", "a\r\nb\r\n"},
		{"a\nb\n", "a\r\nb\r\n"},
		{"\n\n", "\r\n\r\n"},
		{"a\r\nb\nc", "a\r\nb\r\nc"},
		{"lone\rcr\n", "lone\rcr\r\n"},
		{"\r\r\n", "\r\r\n"},
	} {
		got := CRLF([]byte(tc.in))
		if string(got) != tc.want {
			t.Errorf("CRLF(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if n := CRLFSize([]byte(tc.in)); n != int64(len(tc.want)) {
			t.Errorf("CRLFSize(%q) = %d, want %d", tc.in, n, len(tc.want))
		}
	}
	in := []byte("x\r\ny\r\n")
	if out := CRLF(in); &out[0] != &in[0] {
		t.Error("CRLF copied a source that needed nothing")
	}
}

func FuzzCRLF(f *testing.F) {
	f.Add([]byte("a\nb\r\nc\r"))
	f.Fuzz(func(t *testing.T, in []byte) {
		out := CRLF(in)
		if int64(len(out)) != CRLFSize(in) {
			t.Fatalf("size %d, CRLFSize %d", len(out), CRLFSize(in))
		}
		if bytes.Count(out, []byte("\n")) != bytes.Count(out, []byte("\r\n")) {
			t.Fatalf("%q has a bare LF", out)
		}
		if !bytes.Equal(bytes.ReplaceAll(out, []byte("\r\n"), []byte("\n")), bytes.ReplaceAll(in, []byte("\r\n"), []byte("\n"))) {
			t.Fatalf("%q changed more than line ends of %q", out, in)
		}
	})
}

type keys map[string]*store.Account

func (k keys) ByKey(key string) (*store.Account, bool) { a, ok := k[key]; return a, ok }

func TestLogin(t *testing.T) {
	t.Parallel()
	acc := &store.Account{ID: "a1"}
	guard := authlimit.New(2, time.Minute, false, time.Now)
	a := New(Config{Keys: keys{"right": acc}, AuthLimiter: guard, PerAccount: 1})

	got, release, err := a.Login("192.0.2.1", "right")
	if err != nil || got != acc {
		t.Fatalf("Login(right) = %v, %v", got, err)
	}
	if _, _, err := a.Login("192.0.2.2", "right"); !errors.Is(err, ErrAccountBusy) {
		t.Fatalf("second connection of the account: %v, want ErrAccountBusy", err)
	}
	release()
	release() // a second call gives nothing back twice
	_, release2, err := a.Login("192.0.2.2", "right")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	release2()

	for range 2 {
		if _, _, err := a.Login("192.0.2.9", "wrong"); !errors.Is(err, ErrWrongKey) {
			t.Fatalf("wrong key: %v, want ErrWrongKey", err)
		}
	}
	if _, _, err := a.Login("192.0.2.9", "guess"); !errors.Is(err, ErrLimited) {
		t.Fatalf("past the limit: %v, want ErrLimited", err)
	}
}

func TestListenerBoundsAddresses(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := make(chan struct{}, 1)
	a := New(Config{PerAddress: 1})
	bounded := a.Listener(ln, "* BYE Too many connections\r\n", func() { refused <- struct{}{} })
	defer bounded.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := bounded.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	first, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	server := <-accepted
	second, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(second).ReadString('\n')
	if line != "* BYE Too many connections\r\n" {
		t.Fatalf("second connection read %q, %v", line, err)
	}
	<-refused
	second.Close()
	server.Close() // the address's place is given back
	third, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("a connection after the first closed was not accepted")
	}
}
