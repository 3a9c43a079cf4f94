package loadgen

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/mailparse"
)

// defaultMaxMessageBytes is MAILSINK_MAX_MESSAGE_BYTES's default, the size
// the reads benchmark builds its messages at.
func defaultMaxMessageBytes(t *testing.T) int {
	t.Helper()
	cfg, err := config.Load(func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return int(cfg.MaxMessageBytes)
}

// Every hostile message fills the default size limit without passing it,
// and SMTP can carry it as it is: CRLF line ends, no line over 998 bytes.
func TestHostileMessagesFillTheSizeLimit(t *testing.T) {
	size := defaultMaxMessageBytes(t)
	for _, s := range HostileShapes() {
		raw, count := s.Build(size)
		if len(raw) > size || len(raw) < size-1024 {
			t.Errorf("%s: %d bytes, want %d at most and within 1 KiB of it", s.Name, len(raw), size)
		}
		if !bytes.HasSuffix(raw, []byte("\r\n")) {
			t.Errorf("%s: does not end with CRLF", s.Name)
		}
		for i, line := range bytes.Split(raw[:len(raw)-2], []byte("\r\n")) {
			if len(line) > 998 || bytes.ContainsAny(line, "\r\n") {
				t.Errorf("%s: line %d has %d bytes or a bare CR or LF", s.Name, i+1, len(line))
				break
			}
		}
		if count == "" {
			t.Errorf("%s: no count for the report", s.Name)
		}
	}
}

// Each message is what its name says when the parser reads it, and the
// attachment endpoints ask for the last attachment the parser lists.
func TestHostileMessagesParseAsIntended(t *testing.T) {
	const size = 4 << 20 // large enough to pass every parser limit
	want := map[string]func(m *mailparse.Message) string{
		"large-attachment": func(m *mailparse.Message) string {
			if len(m.Body.Attachments) != 1 || m.Body.Attachments[0].Size < size/2 || m.Body.HTML == nil {
				return "want an HTML part and one attachment of most of the message"
			}
			return ""
		},
		"preview-image-bomb": func(m *mailparse.Message) string {
			a := m.Body.Attachments
			if m.Body.HTML == nil || strings.Count(*m.Body.HTML, "cid:img") < 200_000 ||
				len(a) != 1 || a[0].ContentID == nil || *a[0].ContentID != "img" || a[0].Size != imageBombImage {
				return "want an HTML part of over 200,000 cid:img references and the one image"
			}
			return ""
		},
		"header-bomb": func(m *mailparse.Message) string {
			if !m.Body.Cut.HeaderFields || m.Body.Text == nil || *m.Body.Text != "The body.\n" {
				return "want the header cut and the body read"
			}
			return ""
		},
		"part-header-bomb": func(m *mailparse.Message) string {
			if !m.Body.Cut.HeaderFields || len(m.Body.Attachments) != 1 || m.Body.Attachments[0].Size != len64("hello") {
				return "want the part's header cut and its attachment read"
			}
			return ""
		},
		"many-parts": func(m *mailparse.Message) string {
			if !m.Body.Cut.Parts {
				return "want the parts cut"
			}
			return ""
		},
		"links-parens": func(m *mailparse.Message) string {
			if m.Body.Text == nil || !strings.HasPrefix(*m.Body.Text, "http://a.example/)))") || len(*m.Body.Text) < size/2 {
				return "want the URL and the parentheses as the text"
			}
			return ""
		},
		"invalid-utf8": func(m *mailparse.Message) string {
			if m.Body.Text == nil || strings.Trim(*m.Body.Text, "\uFFFD\n") != "" || !strings.HasPrefix(*m.Body.Text, "\uFFFD\n\uFFFD\n") {
				return "want a text of one U+FFFD a line"
			}
			return ""
		},
	}
	for _, s := range HostileShapes() {
		raw, _ := s.Build(size)
		m, err := mailparse.Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		check, ok := want[s.Name]
		if !ok {
			t.Errorf("%s: no check for this shape", s.Name)
			continue
		}
		if msg := check(m); msg != "" {
			t.Errorf("%s: %s; got %d attachments, cut %+v", s.Name, msg, len(m.Body.Attachments), m.Body.Cut)
		}
		if last := max(len(m.Body.Attachments)-1, 0); s.Attachment != last {
			t.Errorf("%s: the attachment endpoints ask for %d, want %d, the last of the %d attachments listed", s.Name, s.Attachment, last, len(m.Body.Attachments))
		}
	}
}

func len64(s string) int64 { return int64(len(s)) }
