package codes

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/internal/mailparse"
)

// TestCorpus measures precision and recall on the labelled corpus:
// verification mails in many languages and look-alikes (orders, invoices,
// dates, phone numbers, prices, zip codes, tracking numbers) that hold none.
func TestCorpus(t *testing.T) {
	labels := readLabels(t, "testdata/labels.tsv")
	var found, correct, want int
	langs := map[string]bool{}
	verification, lookalikes := 0, 0
	for name, codes := range labels {
		raw, err := os.ReadFile(filepath.Join("testdata/corpus", name))
		if err != nil {
			t.Fatal(err)
		}
		m, err := mailparse.Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := extract(deref(m.Subject), deref(m.Body.Text), deref(m.Body.HTML))
		if len(codes) > 0 {
			verification++
			langs[strings.SplitN(name, "-", 2)[0]] = true
		} else {
			lookalikes++
		}
		want += len(codes)
		found += len(got)
		for _, g := range got {
			if slices.Contains(codes, g) {
				correct++
			}
		}
		if !slices.Equal(got, codes) {
			t.Logf("%s: got %q, want %q", name, got, codes)
		}
	}
	if verification < 30 || lookalikes < 30 || len(langs) < 6 {
		t.Errorf("corpus: %d verification mails in %d languages, %d look-alikes; want >= 30, >= 6, >= 30",
			verification, len(langs), lookalikes)
	}
	precision := float64(correct) / float64(max(found, 1))
	recall := float64(correct) / float64(max(want, 1))
	t.Logf("corpus: %d verification mails (%d languages), %d look-alikes; precision %.1f%% (%d/%d), recall %.1f%% (%d/%d)",
		verification, len(langs), lookalikes, 100*precision, correct, found, 100*recall, correct, want)
	if precision < 0.95 || recall < 0.95 {
		t.Errorf("precision %.1f%%, recall %.1f%%; want both >= 95%%", 100*precision, 100*recall)
	}
}

func readLabels(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, codes, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("%s: bad line %q", path, line)
		}
		out[name] = []string{}
		if codes != "-" {
			out[name] = strings.Fields(codes)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// extract is Extract with a context that does not end.
func extract(subject, text, html string) []string {
	out, _ := Extract(context.Background(), subject, text, html)
	return out
}

func TestExtract(t *testing.T) {
	tests := []struct {
		name, subject, text, html string
		want                      []string
	}{
		{name: "empty"},
		{name: "plain", text: "Your code is 123456.", want: []string{"123456"}},
		{name: "before keyword", subject: "123456 is your login code", want: []string{"123456"}},
		{name: "split by space", text: "Verification code: 123 456", want: []string{"123456"}},
		{name: "split by dash", text: "Your code: ABC-DEF", want: []string{"ABCDEF"}},
		{name: "alone below keyword", text: "Enter this code:\n\n  482913  \n\nThanks", want: []string{"482913"}},
		{name: "html cells", html: "<p>Your code</p><table><tr><td>4</td><td>8</td><td>2</td><td>9</td></tr></table>", want: []string{"4829"}},
		{name: "entities", html: "<p>Code&nbsp;:&nbsp;<b>5521</b></p>", want: []string{"5521"}},
		{name: "one value once", subject: "Code 777123", text: "Your code is 777123", html: "<b>code 777 123</b>", want: []string{"777123"}},
		{name: "chinese attached", text: "您的验证码123456，5分钟内有效", want: []string{"123456"}},
		{name: "no keyword", text: "Order 123456 shipped on 2024-05-01."},
		{name: "zip code", text: "Zip code 94103"},
		{name: "price", text: "Your code is valid for orders over $1500."},
		{name: "date", text: "Code expires 12/05/2024"},
		{name: "phone", text: "Code questions? Call 0800 123 456 789"},
		{name: "year unit", text: "コード 2024年"},
		{name: "lower-case word", text: "code: abcdef"},
		{name: "script left out", html: "<script>var code = 123456</script><p>Hello</p>"},
		{name: "shipping is no pin", text: "shipping 12345"},
		{name: "promotion code shape", text: "Use code SAVE2024 at checkout"},
		{name: "random letters and digits", text: "Use code SA7E20 to sign in", want: []string{"SA7E20"}},
		{name: "verify", text: "Enter 604221 to verify your address", want: []string{"604221"}},
		{name: "order after code", text: "Your code for order 55555 is 987654", want: []string{"987654"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := extract(tt.subject, tt.text, tt.html)
			if !slices.Equal(got, tt.want) {
				t.Errorf("extract(%q, %q, %q) = %q, want %q", tt.subject, tt.text, tt.html, got, tt.want)
			}
		})
	}
}

func TestExtractBounds(t *testing.T) {
	var b strings.Builder
	for i := range 100 {
		b.WriteString("code " + strings.Repeat(string(rune('1'+i%9)), 6) + "\n")
	}
	if got := extract("", b.String(), ""); len(got) > MaxCodes {
		t.Errorf("%d codes, want at most %d", len(got), MaxCodes)
	}
	huge := strings.Repeat("é", MaxScan) + "\ncode 123456"
	if got := extract("", huge, huge); len(got) != 0 {
		t.Errorf("a code past MaxScan was read: %q", got)
	}
}

func FuzzExtract(f *testing.F) {
	f.Add("Your code 123456", "Code: 123 456", "<td>1</td><td>2</td>")
	f.Add("验证码", "コード：ABC-DEF", "<p>код 12-34-56</p>")
	f.Add("", "\xff\xfe code 1 2 3 4", "<a href=x>code</a> 9999")
	f.Fuzz(func(t *testing.T, subject, text, html string) {
		got := extract(subject, text, html)
		if len(got) > MaxCodes {
			t.Fatalf("%d codes", len(got))
		}
		for _, v := range got {
			if v == "" || strings.ContainsAny(v, " -") {
				t.Fatalf("bad value %q", v)
			}
		}
	})
}

// A message of one long line of keywords and numbers costs linear time.
func TestExtractLongLine(t *testing.T) {
	text := strings.Repeat("code 123456 ", MaxScan/12)
	if got := extract("", text, "<p>"+text); len(got) != 1 {
		t.Errorf("got %d codes, want 1", len(got))
	}
}
