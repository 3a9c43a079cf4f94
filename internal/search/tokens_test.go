package search

import (
	"hash/maphash"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// tokensWordByWord is Tokens as it was: each word lower-cased on its own.
func tokensWordByWord(s string) []string {
	var out []string
	start := -1
	for i, r := range s {
		word := unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
		switch {
		case word && start < 0:
			start = i
		case !word && start >= 0:
			out = append(out, strings.ToLower(s[start:i]))
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, strings.ToLower(s[start:]))
	}
	return out
}

// TestTokensAsWordByWord: lower-casing the whole text first splits every
// rune, and the corpus's messages, into the same words as lower-casing
// word by word did, so that digests made before still match the words of
// a query.
func TestTokensAsWordByWord(t *testing.T) {
	var b strings.Builder
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		b.WriteString("a")
		b.WriteRune(r)
		b.WriteString("b ")
		b.WriteRune(r)
		b.WriteString(" ")
	}
	texts := []string{b.String(), "Ünïcode ÇA VA? İstanbul ΣΊΣΥΦΟΣ K\u212a \xff\xfeBAD\xc3 utf8", ""}
	files, _ := filepath.Glob("../mailparse/testdata/corpus/*/*.eml")
	if len(files) == 0 {
		t.Fatal("no corpus")
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, string(raw))
	}
	for i, s := range texts {
		if got, want := Tokens(s), tokensWordByWord(s); !slices.Equal(got, want) {
			for j := range min(len(got), len(want)) {
				if got[j] != want[j] {
					t.Fatalf("text %d: word %d is %q, word by word %q", i, j, got[j], want[j])
				}
			}
			t.Fatalf("text %d: %d words, word by word %d", i, len(got), len(want))
		}
	}
}

// bloomBySortedWords is bloomOf as it was: the words sorted to count the
// distinct ones.
func (x *Index) bloomBySortedWords(text string) []uint64 {
	if text == "" {
		return []uint64{}
	}
	words := strings.Fields(text)
	slices.Sort(words)
	words = slices.Compact(words)
	n := max(1, (len(words)*bitsPerWord+63)/64)
	bloom := make([]uint64, n)
	for _, w := range words {
		h1, h2 := x.hash(w)
		for k := range uint64(hashes) {
			bit := (h1 + k*h2) % uint64(n*64)
			bloom[bit/64] |= 1 << (bit % 64)
		}
	}
	return bloom
}

// TestBloomAsBySortedWords: telling distinct words apart by their hashes
// sets the same bits as sorting them did.
func TestBloomAsBySortedWords(t *testing.T) {
	x := &Index{seed: maphash.MakeSeed()}
	r := rand.New(rand.NewPCG(3, 5))
	for range 500 {
		var words []string
		for range r.IntN(400) {
			words = append(words, string(rune('a'+r.IntN(26)))+strings.Repeat("x", r.IntN(4)))
		}
		text := strings.Join(words, " ")
		if got, want := x.bloomOf(text), x.bloomBySortedWords(text); !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: filter %x, by sorted words %x", text, got, want)
		}
	}
}

// TestJoinWordsAsJoinedTokens: a digest's text is the text's words joined
// by spaces, as joining Tokens made it, when they fit; past the bound, as
// many whole words of that as fit.
func TestJoinWordsAsJoinedTokens(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 4))
	words := []string{"a", "Zanzibar", "été", "ΣΊΣΥΦΟΣ", "x1", "日本語", "naïve"}
	for range 300 {
		var b strings.Builder
		for range r.IntN(40) {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteString([]string{" ", ", ", "\n", "--", "\u00a0"}[r.IntN(5)])
		}
		text := b.String()
		all := strings.Join(Tokens(text), " ")
		max := r.IntN(len(all) + 10)
		got := joinWords(text, max)
		switch {
		case len(all) <= max && got != all:
			t.Fatalf("%q, max %d: %q, want %q", text, max, got, all)
		case len(got) > max || !strings.HasPrefix(all, got) || (got != "" && got != all && all[len(got)] != ' '):
			t.Fatalf("%q, max %d: %q is not the whole words of %q that fit", text, max, got, all)
		case got != all && len(got)+min(len(got), 1)+len(Tokens(all[len(got):])[0]) <= max:
			t.Fatalf("%q, max %d: %q leaves out a word that fits", text, max, got)
		}
	}
}
