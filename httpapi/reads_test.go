package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/mailparse"
	"github.com/mailsink/mailsink/internal/testenv"
)

// sendRaw sends raw over SMTP, without a key, to rcpt (an address of the
// acme account's domain) and returns the stored email's id.
func sendRaw(t *testing.T, e *testenv.Env, rcpt string, raw []byte) string {
	t.Helper()
	c, err := smtp.Dial(e.SMTP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SendMail("app@example.com", []string{rcpt}, bytes.NewReader(raw)); err != nil {
		t.Fatalf("send: %v", err)
	}
	items := list(t, e, acme, "recipient="+rcpt)
	if len(items) != 1 {
		t.Fatalf("%d emails to %s, want 1", len(items), rcpt)
	}
	return items[0]["id"].(string)
}

// base64Body is a message of one text/plain part of charset utf-8 whose
// content is content, base64-encoded in lines of 76 characters.
func base64Body(subject string, content []byte) []byte {
	var b bytes.Buffer
	b.WriteString("From: app@example.com\r\nSubject: " + subject + "\r\nContent-Type: text/plain; charset=utf-8\r\n" +
		"Content-Transfer-Encoding: base64\r\n\r\n")
	enc := base64.StdEncoding.EncodeToString(content)
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n")
	return b.Bytes()
}

// headerBomb is a message whose header has n tiny fields, then a text body.
func headerBomb(n int) []byte {
	var b bytes.Buffer
	b.WriteString("From: app@example.com\r\nSubject: header bomb\r\n")
	for range n {
		b.WriteString("X: y\r\n")
	}
	b.WriteString("\r\nthe body\r\n")
	return b.Bytes()
}

// TestHostileHeaderBomb: a message with a quarter of a million header
// fields is answered with the first 1,000 and says so; its raw source is
// served byte-exact, without parsing.
func TestHostileHeaderBomb(t *testing.T) {
	t.Parallel()
	raw := headerBomb(250000)
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		id := sendRaw(t, e, "bomb@acme.test", raw)
		resp := get(t, e, "/v1/emails/"+id, acme)
		if resp.Status != http.StatusOK {
			t.Fatalf("detail: status %d: %.200s", resp.Status, resp.Body)
		}
		var detail struct {
			Item struct {
				Body struct {
					Raw       string            `json:"raw"`
					Text      *string           `json:"text"`
					Headers   map[string]string `json:"headers"`
					Truncated []struct {
						What  string `json:"what"`
						Limit int    `json:"limit"`
					} `json:"truncated"`
				} `json:"body"`
			} `json:"item"`
		}
		if err := json.Unmarshal(resp.Body, &detail); err != nil {
			t.Fatalf("detail is not JSON: %v", err)
		}
		b := detail.Item.Body
		if b.Text == nil || *b.Text != "the body\n" {
			t.Errorf("text %v, want the body after the header", b.Text)
		}
		if n := strings.Count(b.Headers["x"], "y"); n != mailparse.MaxHeaderFields-2 {
			t.Errorf("%d X fields shown, want the %d of the first %d fields", n, mailparse.MaxHeaderFields-2, mailparse.MaxHeaderFields)
		}
		if len(b.Truncated) != 1 || b.Truncated[0].What != "headerFields" || b.Truncated[0].Limit != mailparse.MaxHeaderFields {
			t.Errorf("truncated = %+v, want headerFields at %d", b.Truncated, mailparse.MaxHeaderFields)
		}
		if b.Raw != string(raw) {
			t.Errorf("detail's raw differs from what was sent (%d bytes, want %d)", len(b.Raw), len(raw))
		}
		if got := get(t, e, "/v1/emails/"+id+"/raw", acme); got.Status != http.StatusOK || !bytes.Equal(got.Body, raw) {
			t.Errorf("/raw: status %d, %d bytes; want 200 and the raw byte-exact", got.Status, len(got.Body))
		}
		// An ordinary message says nothing was cut.
		plain := sendRaw(t, e, "plain@acme.test", []byte("From: app@example.com\r\nSubject: hi\r\n\r\nhi\r\n"))
		if got := get(t, e, "/v1/emails/"+plain, acme); !bytes.Contains(got.Body, []byte(`"truncated":[]`)) {
			t.Errorf("an ordinary detail: %.300s; want \"truncated\":[]", got.Body)
		}
	})
}

// TestHostileLinks: a URL followed by a million closing parentheses (a
// quadratic trim before) answers at once with the URL.
func TestHostileLinks(t *testing.T) {
	t.Parallel()
	raw := base64Body("links", []byte("http://a.example/"+strings.Repeat(")", 1<<20)))
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		id := sendRaw(t, e, "links@acme.test", raw)
		resp := get(t, e, "/v1/emails/"+id+"/links", acme)
		if resp.Status != http.StatusOK || string(resp.Body) != `{"items":[{"url":"http://a.example/","text":null}]}`+"\n" {
			t.Errorf("links: status %d, %.300s", resp.Status, resp.Body)
		}
		if resp := get(t, e, "/v1/emails/"+id+"/codes", acme); resp.Status != http.StatusOK {
			t.Errorf("codes: status %d", resp.Status)
		}
	})
}

// TestDetailOfInvalidUTF8: a body of bytes that are not UTF-8 is answered
// as valid JSON, each run of them one U+FFFD in the text.
func TestDetailOfInvalidUTF8(t *testing.T) {
	t.Parallel()
	raw := base64Body("bytes", bytes.Repeat([]byte{0xff, 'a'}, 1<<20))
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		id := sendRaw(t, e, "bytes@acme.test", raw)
		resp := get(t, e, "/v1/emails/"+id, acme)
		var detail struct {
			Item struct {
				Body struct {
					Raw  string `json:"raw"`
					Text string `json:"text"`
				} `json:"body"`
			} `json:"item"`
		}
		if resp.Status != http.StatusOK {
			t.Fatalf("status %d", resp.Status)
		}
		if err := json.Unmarshal(resp.Body, &detail); err != nil {
			t.Fatalf("the detail is not JSON: %v", err)
		}
		if want := strings.Repeat("\uFFFDa", 1<<20); detail.Item.Body.Text != want {
			t.Errorf("text has %d bytes, want %d", len(detail.Item.Body.Text), len(want))
		}
		if detail.Item.Body.Raw != string(raw) {
			t.Errorf("raw has %d bytes, want %d", len(detail.Item.Body.Raw), len(raw))
		}
	})
}

// TestReadBudget: with a small read budget, a read that cannot get room
// within the wait is answered 503 with Retry-After; another account keeps
// its half; once the read that held the budget ends, reads get through.
func TestReadBudget(t *testing.T) {
	t.Parallel()
	edit := func(c *config.Config) {
		c.Reads.Budget = 8 << 20
		c.Reads.Wait = 100 * time.Millisecond
	}
	raw := append([]byte("From: app@example.com\r\nSubject: big\r\nContent-Type: application/octet-stream\r\n\r\n"),
		bytes.Repeat([]byte("0123456789abcdef\r\n"), (20<<20)/18)...)
	forEachBackendWith(t, edit, func(t *testing.T, e *testenv.Env) {
		id := sendRaw(t, e, "big@acme.test", raw)
		// A client that asks for the raw and does not read it holds its
		// read (the answer is larger than the socket buffers).
		slow, err := net.Dial("tcp", strings.TrimPrefix(e.BaseURL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer slow.Close()
		fmt.Fprintf(slow, "GET /v1/emails/%s/raw HTTP/1.1\r\nHost: x\r\nX-Api-Key: %s\r\n\r\n", id, acme)
		status, err := bufio.NewReader(slow).ReadString('\n')
		if err != nil || !strings.Contains(status, "200") {
			t.Fatalf("the slow client's answer: %q, %v", status, err)
		}
		resp := get(t, e, "/v1/emails/"+id, acme)
		if resp.Status != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("a read past the budget: status %d, Retry-After %q; want 503 with Retry-After", resp.Status, resp.Header.Get("Retry-After"))
		}
		if msg := resp.JSON(t)["error"]; msg == nil {
			t.Errorf("503 without the error envelope: %s", resp.Body)
		}
		// The other account has its own half.
		other := create(t, e, globex, map[string]any{"recipient": "r@globex.test", "sender": "s@example.com", "text": "hi"})
		if resp := get(t, e, "/v1/emails/"+other["id"].(string), globex); resp.Status != http.StatusOK {
			t.Errorf("another account's read: status %d, want 200", resp.Status)
		}
		slow.Close()
		testenv.WaitFor(t, 10*time.Second, "reads to get through after the slow client left", func() bool {
			return get(t, e, "/v1/emails/"+id+"/links", acme).Status == http.StatusOK
		})
	})
}
