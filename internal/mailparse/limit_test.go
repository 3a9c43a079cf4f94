package mailparse

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/internal/testenv/scaling"
)

// headerBomb is a message whose top-level header has n tiny fields.
func headerBomb(n int) []byte {
	var b bytes.Buffer
	b.WriteString("Subject: bomb\r\n")
	for i := 0; i < n; i++ {
		b.WriteString("X: y\r\n")
	}
	b.WriteString("\r\nbody\r\n")
	return b.Bytes()
}

// partHeaderBomb is a multipart message whose one part has n tiny fields
// before its Content-Type.
func partHeaderBomb(n int) []byte {
	var b bytes.Buffer
	b.WriteString("Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n")
	for i := 0; i < n; i++ {
		b.WriteString("X: y\r\n")
	}
	b.WriteString("Content-Type: text/plain\r\n\r\npart text\r\n--b--\r\n")
	return b.Bytes()
}

func TestHeaderFieldLimit(t *testing.T) {
	t.Parallel()
	t.Run("top-level header", func(t *testing.T) {
		m := mustParse(t, headerBomb(50000))
		if !m.Body.Cut.HeaderFields || m.Body.Cut.Parts || m.Body.Cut.Depth {
			t.Errorf("Cut = %+v, want only HeaderFields", m.Body.Cut)
		}
		if got := deref(m.Subject); got != "bomb" {
			t.Errorf("Subject = %q, want %q", got, "bomb")
		}
		if got, want := strings.Count(m.Body.Headers["x"], "y"), MaxHeaderFields-1; got != want {
			t.Errorf("kept %d X fields, want %d (the first %d fields)", got, want, MaxHeaderFields)
		}
		if got := deref(m.Body.Text); got != "body\n" {
			t.Errorf("Text = %q: the body after a cut header is still read", got)
		}
	})
	t.Run("part header", func(t *testing.T) {
		m := mustParse(t, partHeaderBomb(50000))
		if !m.Body.Cut.HeaderFields {
			t.Errorf("Cut = %+v, want HeaderFields", m.Body.Cut)
		}
		// The part's Content-Type came after the cut: the part is plain
		// text by default, and its body is still read.
		if got := deref(m.Body.Text); got != "part text" {
			t.Errorf("Text = %q, want %q", got, "part text")
		}
	})
	t.Run("at the limit nothing is cut", func(t *testing.T) {
		m := mustParse(t, headerBomb(MaxHeaderFields-1))
		if m.Body.Cut.Any() {
			t.Errorf("Cut = %+v for %d fields, want none", m.Body.Cut, MaxHeaderFields)
		}
		m = mustParse(t, partHeaderBomb(MaxHeaderFields-1))
		if m.Body.Cut.Any() {
			t.Errorf("Cut = %+v for a part of %d fields, want none", m.Body.Cut, MaxHeaderFields)
		}
	})
	t.Run("the summary agrees", func(t *testing.T) {
		raw := headerBomb(5000)
		raw = append([]byte(nil), raw...)
		s, err := ParseHeader(raw)
		if err != nil || deref(s.Subject) != "bomb" {
			t.Errorf("ParseHeader: Subject %q, err %v", deref(s.Subject), err)
		}
		checkInvariants(t, raw)
	})
}

func TestCutParts(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	b.WriteString("Content-Type: multipart/mixed; boundary=b\r\n\r\n")
	for i := 0; i < MaxParts+10; i++ {
		b.WriteString("--b\r\nContent-Type: application/octet-stream\r\n\r\nx\r\n")
	}
	b.WriteString("--b--\r\n")
	if c := mustParse(t, b.Bytes()).Body.Cut; !c.Parts || c.Depth || c.HeaderFields {
		t.Errorf("Cut = %+v, want only Parts", c)
	}
	var d bytes.Buffer
	for i := 0; i < MaxDepth+5; i++ {
		d.WriteString("Content-Type: multipart/mixed; boundary=b" + itoa(i) + "\r\n\r\n--b" + itoa(i) + "\r\n")
	}
	d.WriteString("Content-Type: text/plain\r\n\r\ndeep")
	if c := mustParse(t, d.Bytes()).Body.Cut; !c.Depth || c.Parts || c.HeaderFields {
		t.Errorf("Cut = %+v, want only Depth", c)
	}
}

// TestFieldLimiterPassesOrdinaryMessages checks that the limiter changes
// nothing of a message under the limits, whatever the size of the pieces
// its reads come in: every fixture parses to what it parsed before.
func TestFieldLimiterPassesOrdinaryMessages(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 10000)
	raw := []byte("Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\npreamble\r\n--b\r\n" +
		"Content-Type: text/plain\r\nX-Long: " + long + "\r\n folded\r\n\r\n" + long + "\r\n--b\r\n" +
		"Content-Type: text/html\r\n\r\n<p>hi</p>\r\n--b--\r\nepilogue\r\n")
	var cut bool
	got, err := io.ReadAll(newFieldLimiter(bytes.NewReader(raw[46:]), "b", &cut))
	if err != nil || !bytes.Equal(got, raw[46:]) || cut {
		t.Errorf("the limiter changed a message under its limits (cut %v, err %v)", cut, err)
	}
	m := mustParse(t, raw)
	if deref(m.Body.Text) != long || deref(m.Body.HTML) != "<p>hi</p>" || m.Body.Cut.Any() {
		t.Errorf("parse: text %d bytes, html %q, cut %+v", len(deref(m.Body.Text)), deref(m.Body.HTML), m.Body.Cut)
	}
}

func TestParseContextStops(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	raw := partHeaderBomb(10)
	m, err := ParseContext(ctx, raw)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if m == nil || m.Body.Headers == nil || m.Body.Text != nil {
		t.Errorf("a cancelled parse returned %+v; want the header only", m)
	}
	if _, ok := OpenAttachment(ctx, []byte("Content-Type: application/pdf\r\n\r\nx"), 0, func(Attachment, io.Reader) {
		t.Error("use called after ctx ended")
	}); ok {
		t.Error("OpenAttachment found an attachment after ctx ended")
	}
}

func TestOpenAttachmentEqualsReadAttachment(t *testing.T) {
	t.Parallel()
	for _, rel := range fixtures(t) {
		raw := readFixture(t, rel)
		m := mustParse(t, raw)
		if n, ok := OpenAttachment(context.Background(), raw, len(m.Body.Attachments), func(Attachment, io.Reader) {}); ok || n != len(m.Body.Attachments) {
			t.Errorf("%s: OpenAttachment past the last: %d attachments (found %v), want %d", rel, n, ok, len(m.Body.Attachments))
		}
		for i, want := range m.Body.Attachments {
			var got bytes.Buffer
			_, ok := OpenAttachment(context.Background(), raw, i, func(a Attachment, r io.Reader) {
				io.Copy(&got, r)
			})
			_, content, _ := ReadAttachment(raw, i)
			if !ok || int64(got.Len()) != want.Size || !bytes.Equal(got.Bytes(), content) {
				t.Errorf("%s attachment %d: streamed %d bytes (ok %v), want %d", rel, i, got.Len(), ok, want.Size)
			}
		}
	}
}

// TestParseScales runs each hostile shape at n and 8n: the parser must be
// linear in all of them.
func TestParseScales(t *testing.T) {
	shapes := []struct {
		name  string
		build func(n int) []byte
	}{
		{"header fields", headerBomb},
		{"part header fields", partHeaderBomb},
		{"invalid UTF-8 text", func(n int) []byte {
			return append([]byte("Content-Type: text/plain; charset=utf-8\r\n\r\n"), bytes.Repeat([]byte{0xff, 'a'}, n)...)
		}},
		{"many parts", func(n int) []byte {
			return []byte("Content-Type: multipart/mixed; boundary=b\r\n\r\n" + strings.Repeat("--b\r\nContent-Type: text/plain\r\n\r\nx\r\n", n/40))
		}},
		{"long folded header", func(n int) []byte {
			return []byte("Subject: a" + strings.Repeat("\r\n b", n/4) + "\r\n\r\nx")
		}},
	}
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			scaling.Linear(t, 64<<10, s.build, func(raw []byte) { mustParse(t, raw) })
		})
	}
}

// TestCleanTextEqualsPlainWay compares cleanText with the plain way it
// replaces: CRLF to LF, then invalid runs to U+FFFD.
func TestCleanTextEqualsPlainWay(t *testing.T) {
	t.Parallel()
	inputs := []string{"", "a\r\nb", "\r", "\r\r\n", "\xff\r\n\xfe", "\xff\xfe\r\n", "é\r\n\xe2\x82", "\xe2\x82\xac\xff", "a\rb\n"}
	for _, rel := range fixtures(t) {
		inputs = append(inputs, string(readFixture(t, rel)))
	}
	for _, in := range inputs {
		if got, want := cleanText([]byte(in)), validUTF8(strings.ReplaceAll(in, "\r\n", "\n")); got != want {
			t.Errorf("cleanText(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzCleanText(f *testing.F) {
	f.Add([]byte("\xff\r\n\xfe"))
	f.Fuzz(func(t *testing.T, in []byte) {
		if got, want := cleanText(in), validUTF8(strings.ReplaceAll(string(in), "\r\n", "\n")); got != want {
			t.Errorf("cleanText(%q) = %q, want %q", in, got, want)
		}
	})
}
