package spam

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/testenv/spamdtest"
)

// One spamd for the package's tests: it takes seconds to start.
var spamd spamdtest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	spamd.Stop()
	os.Exit(code)
}

func client(t *testing.T) *Client {
	return &Client{Addr: spamd.Get(t).Addr(), Timeout: 30 * time.Second}
}

// The GTUBE test string is scored as spam by a real spamd, with the rule
// that said so.
func TestGTUBEIsSpam(t *testing.T) {
	t.Parallel()
	c := client(t)
	r, err := c.Check(context.Background(), spamdtest.Message("Test", "This is the GTUBE:\r\n"+spamdtest.GTUBE))
	if err != nil {
		t.Fatal(err)
	}
	if !r.IsSpam || r.Score < 1000 || r.Threshold != 5 {
		t.Errorf("GTUBE: isSpam %v, score %v, threshold %v; want spam, at least 1000, 5", r.IsSpam, r.Score, r.Threshold)
	}
	i := slices.IndexFunc(r.Rules, func(x Rule) bool { return x.Name == "GTUBE" })
	if i < 0 || r.Rules[i].Score != 1000 || !strings.Contains(r.Rules[i].Description, "Generic Test for Unsolicited Bulk Email") {
		t.Errorf("GTUBE rule not reported with its score and description: %+v", r.Rules)
	}
	if r.Truncated {
		t.Error("a small message was reported cut")
	}
}

// An ordinary message is not spam; one over 500 KB is scored on its first
// 500 KB, and the answer says so.
func TestHamAndLargeMessage(t *testing.T) {
	t.Parallel()
	c := client(t)
	ham := spamdtest.Message("Minutes of Monday's meeting", "Hi all,\r\n\r\nthe minutes are attached. See you next week.\r\n\r\nAnna")
	r, err := c.Check(context.Background(), ham)
	if err != nil {
		t.Fatal(err)
	}
	if r.IsSpam || r.Score >= r.Threshold {
		t.Errorf("an ordinary message: isSpam %v, score %v of %v", r.IsSpam, r.Score, r.Threshold)
	}
	large := spamdtest.Message("Big", strings.Repeat("All work and no play makes Jack a dull boy.\r\n", 20000))
	r, err = c.Check(context.Background(), large)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Truncated || r.ScoredBytes != MaxBytes {
		t.Errorf("a %d-byte message: truncated %v, scored %d bytes; want true, %d", len(large), r.Truncated, r.ScoredBytes, MaxBytes)
	}
}

// spamd down, answering something else, or not answering in time is an
// *Error; a request whose context ends returns the context's error.
func TestFailures(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	l.Close()

	garbage := serve(t, func(c net.Conn) { c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n")) })
	refused := serve(t, func(c net.Conn) { c.Write([]byte("SPAMD/1.0 76 Bad header line: X\r\n")) })
	silent := serve(t, func(c net.Conn) { time.Sleep(2 * time.Second) })
	msg := spamdtest.Message("x", "y")
	for _, tc := range []struct {
		name, addr string
		timeout    time.Duration
		want       string
	}{
		{"down", down, 5 * time.Second, "connect"},
		{"not spamd", garbage, 5 * time.Second, "not a spamd answer"},
		{"error answer", refused, 5 * time.Second, "Bad header line"},
		{"silent", silent, 200 * time.Millisecond, "no answer within 200ms"},
	} {
		_, err := (&Client{Addr: tc.addr, Timeout: tc.timeout}).Check(context.Background(), msg)
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v; want an *Error saying %q", tc.name, err, tc.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	_, err = (&Client{Addr: silent, Timeout: 10 * time.Second}).Check(ctx, msg)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v, want context.Canceled", err)
	}
}

// serve answers each connection on a loopback listener with answer, after
// reading the request's first bytes.
func serve(t *testing.T, answer func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.Read(make([]byte, 64))
				answer(c)
			}()
		}
	}()
	return l.Addr().String()
}

// The report's table is read with descriptions that wrap, scores of
// every shape, and a template that has no line of dashes.
func TestParseRules(t *testing.T) {
	t.Parallel()
	report := "Content analysis details:   (7.1 points, 5.0 required)\n\n" +
		" pts rule name              description\n" +
		"---- ---------------------- --------------------------------------------------\n" +
		"1000 GTUBE                  BODY: Generic Test for Unsolicited Bulk Email\n" +
		"-0.0 NO_RELAYS              Informational: message was not relayed via SMTP\n" +
		" 2.5 URIBL_BLACK            Contains an URL listed in the URIBL blacklist\n" +
		"                            [URIs: spam.example]\n" +
		" 0.0 T_REMOTE_IMAGE         Message contains an external image\n" +
		"\nThe original message was not completely plain text.\n" +
		" 9.9 NOT_A_RULE             after the table\n"
	got := parseRules([]byte(report))
	want := []Rule{
		{"GTUBE", 1000, "BODY: Generic Test for Unsolicited Bulk Email"},
		{"NO_RELAYS", 0, "Informational: message was not relayed via SMTP"},
		{"URIBL_BLACK", 2.5, "Contains an URL listed in the URIBL blacklist [URIs: spam.example]"},
		{"T_REMOTE_IMAGE", 0, "Message contains an external image"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("parseRules =\n%+v\nwant\n%+v", got, want)
	}
	custom := "Score 6\n 3.1 RULE_A   first\n 2.9 RULE_B   second\n"
	if got := parseRules([]byte(custom)); len(got) != 2 || got[1].Name != "RULE_B" || got[1].Score != 2.9 {
		t.Errorf("a report without dashes: %+v", got)
	}
}
