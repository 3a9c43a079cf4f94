package jsonenc

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// reference is encoding/json's encoding of s without HTML escaping.
func reference(t testing.TB, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func check(t *testing.T, s string) {
	t.Helper()
	if got, want := AppendString(nil, s), reference(t, s); !bytes.Equal(got, want) {
		t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
	}
}

// Every byte, every rune, UTF-8's encodings of surrogates and of runes past
// U+10FFFF, and random mixes of them: the same bytes as encoding/json.
func TestMatchesEncodingJSON(t *testing.T) {
	for c := 0; c < 256; c++ {
		check(t, string([]byte{byte(c)}))
		check(t, "a"+string([]byte{byte(c)})+"z")
	}
	for r := rune(0); r <= utf8.MaxRune; r += 7 {
		check(t, "x"+string(r)+"y")
	}
	for _, s := range []string{"\xed\xa0\x80", "\xed\xbf\xbf", "\xf4\x90\x80\x80", "\xf8\x88\x80\x80\x80", "\xc0\x80", "\u2028\u2029"} {
		check(t, s)
		check(t, s[:len(s)-1])
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "<", ">", "&", "\"", "\\", "\n", "\x00", "\x7f", "é", "\u2028", "\xff", "😀", "\xe2\x80"}
	for range 20000 {
		var b []byte
		for range rng.IntN(12) {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		check(t, string(b))
	}
}

func FuzzMatchesEncodingJSON(f *testing.F) {
	f.Add("<a href=\"x\">&amp;</a>\u2028\xff")
	f.Fuzz(func(t *testing.T, s string) { check(t, s) })
}
