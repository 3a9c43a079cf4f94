package loadgen

import (
	"bytes"
	"encoding/base64"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"testing"
	"time"
)

// The corpus is the same for the same message number, parses as mail, and
// has about the shares of attachments and rare words it promises; a rare
// word, and the extra word, are in the decoded body.
func TestCorpus(t *testing.T) {
	c := NewCorpus("t1")
	if a, b := c.Message(42, ""), c.Message(42, ""); !bytes.Equal(a.Raw, b.Raw) {
		t.Fatal("message 42 differs between two builds")
	}
	const n = 2000
	attachments, rares := 0, 0
	for i := range n {
		m := c.Message(i, "extraword")
		msg, err := mail.ReadMessage(bytes.NewReader(m.Raw))
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		text := decodedText(t, msg)
		if !strings.Contains(text, "extraword") {
			t.Fatalf("message %d: the extra word is not in the decoded body %q", i, text)
		}
		if m.Rare >= 0 {
			rares++
			if !strings.Contains(strings.ToLower(text), c.RareWord(m.Rare)) {
				t.Fatalf("message %d: rare word %q not in the body", i, c.RareWord(m.Rare))
			}
		}
		if m.Attachment {
			attachments++
		}
		if got, want := msg.Header.Get("To"), m.To; got != want {
			t.Fatalf("message %d: To %q, envelope %q", i, got, want)
		}
	}
	if share := float64(attachments) / n; math.Abs(share-AttachmentShare) > 0.03 {
		t.Errorf("%.3f of the messages have an attachment, want about %.2f", share, AttachmentShare)
	}
	if share := float64(rares) / n; math.Abs(share-RareShare) > 0.015 {
		t.Errorf("%.3f of the messages have a rare word, want about %.2f", share, RareShare)
	}
}

// decodedText returns the text/plain part of msg, decoded.
func decodedText(t *testing.T, msg *mail.Message) string {
	t.Helper()
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	cte, body := msg.Header.Get("Content-Transfer-Encoding"), io.Reader(msg.Body)
	if strings.HasPrefix(mt, "multipart/") {
		p, err := multipart.NewReader(msg.Body, params["boundary"]).NextPart()
		if err != nil {
			t.Fatal(err)
		}
		// multipart decodes quoted-printable itself.
		cte, body = p.Header.Get("Content-Transfer-Encoding"), p
	}
	switch strings.ToLower(cte) {
	case "base64":
		body = base64.NewDecoder(base64.StdEncoding, body)
	case "quoted-printable":
		body = quotedprintable.NewReader(body)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFitLine(t *testing.T) {
	for _, tc := range []struct {
		pts  [][2]float64
		a, b float64
	}{
		{[][2]float64{{10, 21}, {30, 61}, {100, 201}}, 1, 2},
		{[][2]float64{{5, 7}}, 7, 0},
		{nil, 0, 0},
	} {
		a, b := FitLine(tc.pts)
		if math.Abs(a-tc.a) > 1e-9 || math.Abs(b-tc.b) > 1e-9 {
			t.Errorf("FitLine(%v) = %v, %v; want %v, %v", tc.pts, a, b, tc.a, tc.b)
		}
	}
}

func TestCumShare(t *testing.T) {
	top := `Showing nodes accounting for 3.90s, 97.50% of 4s total
      flat  flat%   sum%        cum   cum%
     0.10s  2.50%  2.50%      1.50s 37.50%  github.com/mailsink/mailsink/internal/search.(*Service).digests
     0.20s  5.00%  7.50%      0.50s 12.50%  github.com/mailsink/mailsink/internal/search.(*Service).digest`
	if got, ok := cumShare(top, "search.(*Service).digests"); !ok || math.Abs(got-0.375) > 1e-9 {
		t.Errorf("cumShare = %v, %v; want 0.375, true", got, ok)
	}
	if _, ok := cumShare(top, "nothing.here"); ok {
		t.Error("cumShare found a function the listing lacks")
	}
}

// lat returns n latencies of d.
func lat(d time.Duration, n int) Latencies {
	l := make(Latencies, n)
	for i := range l {
		l[i] = d
	}
	return l
}

func searchResult(emails int, op, body, count, lagMax time.Duration, metaFirst int) *SearchResult {
	s := &SearchStep{Emails: emails, Added: emails, Categories: map[string]*QueryTiming{}}
	for _, cat := range SearchCategories {
		d := time.Millisecond
		switch {
		case cat == CatOperators:
			d = op
		case isBodyCategory(cat):
			d = body
		case cat == CatCountQuery:
			d = count
		}
		s.Categories[cat] = &QueryTiming{Category: cat, Kind: cat, Latency: lat(d, 1000)}
		s.Kinds = append(s.Kinds, s.Categories[cat])
	}
	return &SearchResult{Backend: "embedded", Steps: []*SearchStep{s}, Lag: lat(lagMax, 50), MetaFirst: metaFirst}
}

func TestSearchVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  *SearchResult
		want []bool
	}{
		{"all met", searchResult(100_000, 10*time.Millisecond, 100*time.Millisecond, time.Millisecond, 50*time.Millisecond, 50),
			[]bool{true, true, true, true, true}},
		{"all missed", searchResult(100_000, 60*time.Millisecond, 600*time.Millisecond, 6*time.Millisecond, 2*time.Second, 49),
			[]bool{false, false, false, false, false}},
		{"too few emails", searchResult(30_000, time.Millisecond, time.Millisecond, time.Microsecond, time.Millisecond, 50),
			[]bool{false, false, false, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.res.Verdicts()
			if len(v) != len(tc.want) {
				t.Fatalf("%d verdicts, want %d", len(v), len(tc.want))
			}
			for i, w := range tc.want {
				if v[i].Met != w {
					t.Errorf("%s: met %v, want %v (%s)", v[i].Target, v[i].Met, w, v[i].Evidence)
				}
			}
		})
	}
}

// The report has a row per step and category, the extrapolation labelled
// as one, and the verdicts.
func TestSearchReportMarkdown(t *testing.T) {
	small := searchResult(10_000, time.Millisecond, 2*time.Millisecond, time.Millisecond, 10*time.Millisecond, 50)
	big := searchResult(100_000, 10*time.Millisecond, 20*time.Millisecond, time.Millisecond, 10*time.Millisecond, 50)
	res := &SearchResult{Backend: "redis", Steps: append(small.Steps, big.Steps...), Lag: big.Lag, MetaFirst: 50,
		QueryProfiles: []QueryProfile{{Category: CatOperators, Top: "flat  flat%   sum%        cum   cum%\n 1s 50% 50% 1s 50% f"}}}
	rep := &SearchReport{Command: "make bench-search", Commit: "abc1234", Options: DefaultSearchOptions(), Results: []*SearchResult{res},
		Started: time.Date(2026, 11, 27, 20, 0, 0, 0, time.UTC)}
	md := rep.Markdown()
	for _, want := range []string{
		"commit abc1234", "`make bench-search`", "| 100000 | 100000 |", "| operators | 1.00ms / 1.00ms / 1.00ms (1000) | 10.00ms / 10.00ms / 10.00ms (1000) |",
		"an extrapolation, not a measurement", "| operator-only list p99 <= 50 ms | redis | met |", "the first query after the 250 found 50 of 50",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "not met") {
		t.Errorf("a target is not met in a report that meets them all:\n%s", md)
	}
}
