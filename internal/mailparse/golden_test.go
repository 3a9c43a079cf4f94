package mailparse

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// fixtures returns the paths, relative to testdata, of every .eml fixture:
// the handcrafted ones in testdata and the mail gem corpus in
// testdata/corpus.
func fixtures(t testing.TB) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir("testdata", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (path == filepath.Join("testdata", "golden") || path == filepath.Join("testdata", "fuzz")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".eml") {
			rel, err := filepath.Rel("testdata", path)
			if err != nil {
				return err
			}
			paths = append(paths, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 69+11 {
		t.Fatalf("found %d fixtures, want the 69 corpus messages and the handcrafted ones", len(paths))
	}
	return paths
}

func readFixture(t testing.TB, rel string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", rel))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// golden is the JSON form of a parse result kept in testdata/golden.
type golden struct {
	MessageID   *string            `json:"messageId"`
	Subject     *string            `json:"subject"`
	From        []string           `json:"from"`
	To          []string           `json:"to"`
	Cc          []string           `json:"cc"`
	Date        *string            `json:"date"`
	Text        *string            `json:"text"`
	HTML        *string            `json:"html"`
	Headers     map[string]string  `json:"headers"`
	Attachments []goldenAttachment `json:"attachments"`
}

type goldenAttachment struct {
	Filename    *string `json:"filename"`
	ContentType *string `json:"contentType"`
	Disposition *string `json:"disposition"`
	ContentID   *string `json:"contentId"`
	Size        int64   `json:"size"`
	// SHA256 is the digest of the content Attachment returns for it.
	SHA256 string `json:"sha256"`
}

func toGolden(t *testing.T, raw []byte, m *Message) golden {
	t.Helper()
	g := golden{
		MessageID: m.MessageID, Subject: m.Subject,
		From: m.From, To: m.To, Cc: m.Cc,
		Text: m.Body.Text, HTML: m.Body.HTML,
		Headers:     m.Body.Headers,
		Attachments: []goldenAttachment{},
	}
	if m.Date != nil {
		s := m.Date.Format(time.RFC3339)
		g.Date = &s
	}
	for i, a := range m.Body.Attachments {
		_, content, ok := ReadAttachment(raw, i)
		if !ok {
			t.Fatalf("ReadAttachment(%d) not found", i)
		}
		sum := sha256.Sum256(content)
		g.Attachments = append(g.Attachments, goldenAttachment{
			Filename: a.Filename, ContentType: a.ContentType, Disposition: a.Disposition,
			ContentID: a.ContentID, Size: a.Size, SHA256: hex.EncodeToString(sum[:]),
		})
	}
	return g
}

func marshalGolden(t *testing.T, g golden) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(g); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestGolden compares the parse of every fixture with its golden file.
// Run `go test ./mailparse -run TestGolden -update` to rewrite them, and
// review the diff: a golden file that captures a wrong answer is worse than
// none.
func TestGolden(t *testing.T) {
	for _, rel := range fixtures(t) {
		t.Run(filepath.ToSlash(rel), func(t *testing.T) {
			raw := readFixture(t, rel)
			m := &Message{Body: Body{Raw: raw, Headers: map[string]string{}, Attachments: []Attachment{}}}
			parse(context.Background(), m, raw, true) // without Parse's recover, so a panic fails the test
			got := marshalGolden(t, toGolden(t, raw, m))
			path := filepath.Join("testdata", "golden", rel+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("parse differs from %s:\ngot:\n%s\nwant:\n%s", path, got, want)
			}
		})
	}
}

// TestInvariants checks on every fixture what must hold for any input.
func TestInvariants(t *testing.T) {
	for _, rel := range fixtures(t) {
		t.Run(filepath.ToSlash(rel), func(t *testing.T) {
			t.Parallel()
			checkInvariants(t, readFixture(t, rel))
		})
	}
}

// checkInvariants parses raw and checks that the result is well-formed:
// valid UTF-8 everywhere, non-nil Headers and Attachments, Raw aliasing the
// input, the input untouched, and Attachment agreeing with Body.Attachments.
func checkInvariants(t testing.TB, raw []byte) {
	t.Helper()
	orig := bytes.Clone(raw)
	m := &Message{Body: Body{Raw: raw, Headers: map[string]string{}, Attachments: []Attachment{}}}
	parse(context.Background(), m, raw, true)
	pm, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, orig) {
		t.Fatal("Parse modified its input")
	}
	if len(pm.Body.Raw) != len(raw) || len(raw) > 0 && &pm.Body.Raw[0] != &raw[0] {
		t.Error("Body.Raw is not the input slice")
	}
	if pm.Body.Headers == nil || pm.Body.Attachments == nil {
		t.Fatal("Headers or Attachments is nil")
	}
	hm, err := ParseHeader(raw)
	if err != nil {
		t.Fatal(err)
	}
	if hm.Body.Text != nil || hm.Body.HTML != nil || hm.Body.Headers == nil || len(hm.Body.Headers) != 0 ||
		hm.Body.Attachments == nil || len(hm.Body.Attachments) != 0 || len(hm.Body.Raw) != len(raw) {
		t.Errorf("ParseHeader's Body is not empty with the raw: %+v", hm.Body)
	}
	if hm.Date != nil {
		t.Error("ParseHeader parsed the Date")
	}
	sm, err := ParseSummary(raw)
	if err != nil {
		t.Fatal(err)
	}
	if sm.From != nil || sm.To != nil || sm.Cc != nil || sm.Date != nil {
		t.Errorf("ParseSummary parsed addresses or the date: %+v", sm)
	}
	sm.From, sm.To, sm.Cc = hm.From, hm.To, hm.Cc
	if !reflect.DeepEqual(sm, hm) {
		t.Errorf("ParseSummary and ParseHeader disagree on the subject or id:\n%+v\n%+v", sm, hm)
	}
	hm.Body, hm.Date = pm.Body, pm.Date
	if !reflect.DeepEqual(hm, pm) {
		t.Errorf("ParseHeader and Parse disagree on the fields:\n%+v\n%+v", hm, pm)
	}
	if len(pm.Body.Attachments) != len(m.Body.Attachments) || len(pm.Body.Headers) != len(m.Body.Headers) {
		t.Error("Parse and parse disagree")
	}
	// ParseText is Parse without the attachments' sizes.
	tm, err := ParseText(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	sizeless := *pm
	sizeless.Body.Attachments = slices.Clone(pm.Body.Attachments)
	for i := range sizeless.Body.Attachments {
		sizeless.Body.Attachments[i].Size = 0
	}
	if !reflect.DeepEqual(tm, &sizeless) {
		t.Errorf("ParseText is not Parse without the sizes:\n%+v\n%+v", tm, &sizeless)
	}
	valid := func(what string, s *string) {
		t.Helper()
		if s != nil && !utf8.ValidString(*s) {
			t.Errorf("%s is not valid UTF-8: %q", what, *s)
		}
	}
	valid("MessageID", m.MessageID)
	valid("Subject", m.Subject)
	valid("Text", m.Body.Text)
	valid("HTML", m.Body.HTML)
	for _, list := range [][]string{m.From, m.To, m.Cc} {
		for _, a := range list {
			valid("address", &a)
			if a == "" {
				t.Error("empty address")
			}
		}
	}
	for k, v := range m.Body.Headers {
		valid("header name", &k)
		valid("header "+k, &v)
		if k != strings.ToLower(k) {
			t.Errorf("header name %q is not lower case", k)
		}
	}
	want := map[int]bool{len(m.Body.Attachments): true} // one past the end: absent
	for i := range m.Body.Attachments {
		want[i] = true
	}
	all := ReadAttachments(context.Background(), raw, want)
	if len(all) != len(m.Body.Attachments) {
		t.Errorf("ReadAttachments read %d attachments, Body has %d", len(all), len(m.Body.Attachments))
	}
	for i, a := range m.Body.Attachments {
		if _, content, _ := ReadAttachment(raw, i); !bytes.Equal(all[i], content) {
			t.Errorf("attachment %d: ReadAttachments has %d bytes, ReadAttachment %d", i, len(all[i]), len(content))
		}
		valid("Filename", a.Filename)
		valid("ContentType", a.ContentType)
		valid("Disposition", a.Disposition)
		valid("ContentID", a.ContentID)
		if a.Size < 0 {
			t.Errorf("attachment %d: negative size", i)
		}
		att, content, ok := ReadAttachment(raw, i)
		if !ok {
			t.Errorf("ReadAttachment(%d) not found, Body has %d", i, len(m.Body.Attachments))
			continue
		}
		if int64(len(content)) != a.Size {
			t.Errorf("attachment %d: Size %d, Attachment returned %d bytes", i, a.Size, len(content))
		}
		if !sameAttachment(att, a) {
			t.Errorf("attachment %d: Attachment metadata %s differs from Parse's %s", i, describe(att), describe(a))
		}
	}
	if _, _, ok := ReadAttachment(raw, len(m.Body.Attachments)); ok {
		t.Error("Attachment found one past the end")
	}
	if _, _, ok := ReadAttachment(raw, -1); ok {
		t.Error("Attachment found index -1")
	}
}

func sameAttachment(a, b Attachment) bool {
	eq := func(x, y *string) bool { return x == nil && y == nil || x != nil && y != nil && *x == *y }
	return a.Size == b.Size && eq(a.Filename, b.Filename) && eq(a.ContentType, b.ContentType) &&
		eq(a.Disposition, b.Disposition) && eq(a.ContentID, b.ContentID)
}

func describe(a Attachment) string {
	s := func(p *string) string {
		if p == nil {
			return "nil"
		}
		return *p
	}
	b, _ := json.Marshal(map[string]any{
		"filename": s(a.Filename), "contentType": s(a.ContentType), "disposition": s(a.Disposition),
		"contentId": s(a.ContentID), "size": a.Size,
	})
	return string(b)
}
