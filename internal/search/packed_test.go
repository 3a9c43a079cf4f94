package search

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
)

// TestPackedDigestReadsAsTheDigest packs digests of every shape (empty
// lists, empty strings, strings past 127 bytes whose lengths take two
// bytes, invalid UTF-8, NUL bytes) and reads them back: all but Text
// come back as they were, and the Summary is the list's view of them.
func TestPackedDigestReadsAsTheDigest(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	str := func() string {
		switch rng.IntN(5) {
		case 0:
			return ""
		case 1:
			return strings.Repeat("é", rng.IntN(400))
		case 2:
			return "\xff\x00\x80 " + fmt.Sprint(rng.Int())
		}
		return fmt.Sprintf("name %d <a%d@example.com>", rng.IntN(1000), rng.IntN(1000))
	}
	list := func() []string {
		var l []string
		for range rng.IntN(4) * rng.IntN(20) {
			l = append(l, str())
		}
		return l
	}
	digests := []*Digest{{}, {Text: "dropped"}, {Attachments: 1 << 40, Snippet: strings.Repeat("x", 70000)}}
	for range 2000 {
		digests = append(digests, &Digest{FromAddresses: list(), FromNames: list(), ToAddresses: list(), ToNames: list(),
			Snippet: str(), Attachments: rng.IntN(300), Text: str()})
	}
	for i, d := range digests {
		var bloom []uint64
		for range rng.IntN(3) * rng.IntN(40) {
			bloom = append(bloom, rng.Uint64())
		}
		p := pack(d, bloom)
		if got := p.bloom(); len(got) != 8*len(bloom) || !bloomEqual(got, bloom) {
			t.Fatalf("digest %d: its filter reads back as %x, want %x", i, got, bloom)
		}
		if p == "" {
			t.Fatalf("digest %d packs to \"\", which is no digest", i)
		}
		want := *d
		want.Text = ""
		if got := p.unpack(); !reflect.DeepEqual(got, &want) {
			t.Fatalf("digest %d reads back as\n%+v\nwant\n%+v", i, got, &want)
		}
		wantSummary := Summary{Snippet: d.Snippet, Attachments: d.Attachments}
		if len(d.FromNames) > 0 {
			wantSummary.FromName = d.FromNames[0]
		}
		if got := p.summary(); got != wantSummary {
			t.Fatalf("digest %d: summary %+v, want %+v", i, got, wantSummary)
		}
	}
	if got := packedDigest("").unpack(); got != nil {
		t.Errorf("no digest reads as %+v", got)
	}
}

// bloomEqual reports whether the packed filter b has the bits of words.
func bloomEqual(b bloomBits, words []uint64) bool {
	for bit := range uint64(64 * len(words)) {
		if b.has(bit) != (words[bit/64]&(1<<(bit%64)) != 0) {
			return false
		}
	}
	return true
}

// TestPackedFilterFindsTheWords: every word of a digest's text may be in
// its packed filter, and few others are (about 1% by its sizing).
func TestPackedFilterFindsTheWords(t *testing.T) {
	t.Parallel()
	x := NewIndex()
	var words []string
	for i := range 300 {
		words = append(words, fmt.Sprintf("word%d", i))
	}
	p := pack(&Digest{}, x.bloomOf(strings.Join(words, " ")))
	for _, w := range words {
		if !x.mayHave(p.bloom(), []string{w}) {
			t.Fatalf("%q is not in the filter of a text that has it", w)
		}
	}
	wrong := 0
	for i := range 10000 {
		if x.mayHave(p.bloom(), []string{fmt.Sprintf("other%d", i)}) {
			wrong++
		}
	}
	if wrong > 300 {
		t.Errorf("%d of 10,000 words not in the text may be in its filter", wrong)
	}
	if x.mayHave(packedDigest("").bloom(), []string{"word1"}) || x.mayHave(pack(&Digest{}, x.bloomOf("")).bloom(), []string{"word1"}) {
		t.Error("no digest, or a digest of no words, may have a word")
	}
}

// TestSummaryAsDigest: the index's Summary of an email is what its Digest
// says, and an email without a digest has none.
func TestSummaryAsDigest(t *testing.T) {
	t.Parallel()
	x := NewIndex()
	x.Put(&store.Email{ID: "0190b6d2-7c3e-7a1b-8c2d-000000000001", AccountID: "a", Status: store.StatusReceived})
	x.Put(&store.Email{ID: "0190b6d2-7c3e-7a1b-8c2d-000000000002", AccountID: "a", Status: store.StatusReceived})
	x.SetDigest("a", "0190b6d2-7c3e-7a1b-8c2d-000000000001", &Digest{FromNames: []string{"Ada", "Bob"}, Snippet: "hello", Attachments: 2})
	if got, ok := x.Summary("a", "0190b6d2-7c3e-7a1b-8c2d-000000000001"); !ok || got != (Summary{FromName: "Ada", Snippet: "hello", Attachments: 2}) {
		t.Errorf("summary %+v, %v", got, ok)
	}
	for _, id := range []string{"0190b6d2-7c3e-7a1b-8c2d-000000000002", "0190b6d2-7c3e-7a1b-8c2d-000000000003"} {
		if got, ok := x.Summary("a", id); ok || got != (Summary{}) {
			t.Errorf("%s: summary %+v, %v; want none", id, got, ok)
		}
		if d := x.Digest("a", id); d != nil {
			t.Errorf("%s: digest %+v, want nil", id, d)
		}
	}
}

// TestSummariesAsSummary: a page's summaries read together are each
// email's Summary, across accounts, for emails without a digest, emails
// the index does not hold, ids that are not UUIDs, and an unknown account.
func TestSummariesAsSummary(t *testing.T) {
	t.Parallel()
	x := NewIndex()
	rng := rand.New(rand.NewPCG(5, 6))
	var page []*store.Email
	for i := range 300 {
		account := []string{"a", "b", "c"}[rng.IntN(3)]
		id := store.NewID()
		if i%17 == 0 {
			id = fmt.Sprintf("odd-id-%d", i)
		}
		e := &store.Email{ID: id, AccountID: account, Status: store.StatusReceived}
		switch i % 5 {
		case 0: // not in the index
		case 1: // no digest yet
			x.Put(e)
		default:
			x.Put(e)
			x.SetDigest(account, id, &Digest{FromNames: []string{fmt.Sprint("name ", i)}, Snippet: strings.Repeat("w", i),
				Attachments: i % 3, Text: "some words"})
		}
		page = append(page, e)
	}
	page = append(page, &store.Email{ID: store.NewID(), AccountID: "unknown"})
	// Runs of one account, as a page has, and alternating ones.
	slices.SortStableFunc(page[:150], func(a, b *store.Email) int { return strings.Compare(a.AccountID, b.AccountID) })
	sums, has := x.Summaries(page)
	if len(sums) != len(page) || len(has) != len(page) {
		t.Fatalf("%d summaries, %d flags for %d emails", len(sums), len(has), len(page))
	}
	digested := 0
	for i, e := range page {
		want, ok := x.Summary(e.AccountID, e.ID)
		if has[i] != ok || sums[i] != want {
			t.Errorf("email %d (%s/%s): %+v, %v; Summary gives %+v, %v", i, e.AccountID, e.ID, sums[i], has[i], want, ok)
		}
		if ok {
			digested++
		}
	}
	if digested < 150 {
		t.Errorf("only %d of the emails have a digest", digested)
	}
	if sums, has := x.Summaries(nil); len(sums) != 0 || len(has) != 0 {
		t.Errorf("Summaries(nil) = %v, %v", sums, has)
	}
}

// TestCandidatesKeepTheirDigest: a scan reads each email's digest into one
// scratch Digest; the emails whose body must be read are decided later,
// and must be decided with their own digest, not the last one read. Every
// tenth email is from "Ada"; every body has "common" and none has "ada",
// so "ada common" matches exactly Ada's emails, decided by their names
// and, after the Bloom filters say maybe, their bodies.
func TestCandidatesKeepTheirDigest(t *testing.T) {
	t.Parallel()
	x := NewIndex()
	texts := map[string]string{}
	var want []string
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 500 {
		id := fmt.Sprintf("0190b6d2-7c3e-7a1b-8c2d-%012d", i)
		x.Put(&store.Email{ID: id, AccountID: "a", Sender: "s@x.example", Recipient: "r@acme.test", Status: store.StatusReceived,
			ReceivedAt: base.Add(time.Duration(i) * time.Minute)})
		name := fmt.Sprintf("Sender %d", i)
		if i%10 == 0 {
			name = "Ada Lovelace"
			want = append(want, id)
		}
		texts[id] = fmt.Sprintf("common words of email %d", i)
		x.SetDigest("a", id, &Digest{FromNames: []string{name}, Text: texts[id]})
	}
	slices.Reverse(want)
	var reads int
	got, err := x.Search(context.Background(), store.ListQuery{AccountID: "a", Limit: 1000}, mustParse(t, "ada common"), textsOf(texts, &reads))
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ada common: %d emails, %v; want %d:\n%v\nwant\n%v", len(got), err, len(want), got, want)
	}
	// Ada's bodies are read, and exactly those of the others whose Bloom
	// filter lets "ada" through wrongly: about 1% on average, but every
	// filter holds "common words of email", so for some seeds most or all
	// of them do.
	wrongly := 0
	for id := range texts {
		if !slices.Contains(want, id) && x.mayHave(x.packed("a", id).bloom(), []string{"ada"}) {
			wrongly++
		}
	}
	if reads != len(want)+wrongly {
		t.Errorf("read %d bodies, want Ada's %d and the %d the filters let through", reads, len(want), wrongly)
	}
}

// BenchmarkSummary is the cost of what a list shows of a digest, per
// email.
func BenchmarkSummary(b *testing.B) {
	x := NewIndex()
	id := "0190b6d2-7c3e-7a1b-8c2d-000000000001"
	x.Put(&store.Email{ID: id, AccountID: "a", Status: store.StatusReceived})
	x.SetDigest("a", id, &Digest{FromNames: []string{"Shop Team"}, FromAddresses: []string{"shop@example.com"},
		ToAddresses: []string{"ada@example.com"}, Snippet: strings.Repeat("word ", 32), Attachments: 1})
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := x.Summary("a", id); !ok {
			b.Fatal("no summary")
		}
	}
}

// TestFieldHasPhraseAsTokens: ruling a field out by its text first answers
// as cutting it into words does, for fields and phrases of every kind of
// rune and case.
func TestFieldHasPhraseAsTokens(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	parts := []string{"Ada", "ada", "ADA", "Lovelace", "é", "É", "straße", "STRASSE", "İ", "ı", "K", "K", "-", " ", ".", "@", "1", "x"}
	text := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		return b.String()
	}
	for range 20000 {
		f := text(rng.IntN(12))
		phrase := Tokens(text(rng.IntN(6)))
		if rng.IntN(3) == 0 {
			phrase = Tokens(f)
			if len(phrase) > 1 {
				phrase = phrase[rng.IntN(len(phrase)-1):]
			}
		}
		if got, want := fieldHasPhrase(f, phrase), HasPhrase(Tokens(f), phrase); got != want {
			t.Fatalf("field %q, phrase %q: %v, want %v", f, phrase, got, want)
		}
	}
}

// BenchmarkSummaries reads the summaries of a page of 25 emails, taken at
// random from 100,000 with digests, together (Summaries) and one by one
// (Summary), as a list did before.
func BenchmarkSummaries(b *testing.B) {
	x := NewIndex()
	rng := rand.New(rand.NewPCG(9, 10))
	emails := make([]*store.Email, 100_000)
	for i := range emails {
		e := &store.Email{ID: store.NewID(), AccountID: "a", Status: store.StatusReceived}
		x.Put(e)
		x.SetDigest("a", e.ID, &Digest{FromNames: []string{fmt.Sprint("Sender ", i)}, Snippet: strings.Repeat("word ", 32),
			Attachments: i % 3, Text: fmt.Sprint("words of email ", i)})
		emails[i] = e
	}
	page := make([]*store.Email, 25)
	pick := func() {
		for i := range page {
			page[i] = emails[rng.IntN(len(emails))]
		}
	}
	b.Run("together", func(b *testing.B) {
		for b.Loop() {
			pick()
			x.Summaries(page)
		}
	})
	b.Run("one-by-one", func(b *testing.B) {
		for b.Loop() {
			pick()
			for _, e := range page {
				x.Summary(e.AccountID, e.ID)
			}
		}
	})
}
