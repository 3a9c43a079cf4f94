package smtp_test

// Test of mailsink's patch to handleBdat: a BDAT transaction's Data that
// ends after the transaction was reset must not answer for the next one.
// With the released code the ending goroutine reads c.dataResult, which the
// next transaction's BDAT has replaced: the race detector reports it, and
// the next transaction may get the earlier one's error.

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/emersion/go-smtp"
)

type lateSession struct {
	datas   *atomic.Int32
	proceed chan struct{} // the first Data returns when it is closed
}

func (s *lateSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *lateSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *lateSession) Reset()                               {}
func (s *lateSession) Logout() error                        { return nil }

func (s *lateSession) Data(r io.Reader) error {
	if s.datas.Add(1) == 1 {
		io.ReadFull(r, make([]byte, 5)) // the first chunk, then wait
		<-s.proceed
		return errors.New("the first transaction's data failed")
	}
	_, err := io.Copy(io.Discard, r)
	return err
}

func TestBDATResultOfAResetTransaction(t *testing.T) {
	var datas atomic.Int32
	proceed := make(chan struct{})
	s := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &lateSession{datas: &datas, proceed: proceed}, nil
	}))
	s.Domain = "localhost"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	defer s.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	reply := func() string {
		t.Helper()
		var last string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			last = line
			if len(line) < 4 || line[3] != '-' {
				return strings.TrimSpace(last)
			}
		}
	}
	send := func(cmd, want string) {
		t.Helper()
		io.WriteString(c, cmd)
		if got := reply(); !strings.HasPrefix(got, want) {
			t.Fatalf("%q: %q, want %s", cmd, got, want)
		}
	}
	reply() // greeting
	send("EHLO localhost\r\n", "250")
	send("MAIL FROM:<a@example.com>\r\n", "250")
	send("RCPT TO:<b@example.com>\r\n", "250")
	send("BDAT 5\r\nfirst", "250")
	send("RSET\r\n", "250")
	// The first Data ends now, while the next transaction starts.
	close(proceed)
	send("MAIL FROM:<a@example.com>\r\n", "250")
	send("RCPT TO:<b@example.com>\r\n", "250")
	send("BDAT 6 LAST\r\nsecond", "250")
}
