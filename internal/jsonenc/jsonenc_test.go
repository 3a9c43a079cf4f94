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

// TestWriterMatchesEncodingJSON writes strings longer than a chunk, with
// multi-byte and invalid sequences at every offset around the chunk
// boundaries, through Writer's String and Bytes: the same bytes as
// encoding/json.
func TestWriterMatchesEncodingJSON(t *testing.T) {
	pieces := []string{"é", "€", "😀", "\xff", "\xe2\x82", "\xf0\x9f\x98", "\x80\x80\x80\x80\x80", "\u2028", "\"", "\n", "a"}
	for _, p := range pieces {
		for off := 0; off < 8; off++ {
			s := string(bytes.Repeat([]byte("x"), chunk-off)) + p + string(bytes.Repeat([]byte(p), 3*chunk/len(p)))
			for _, how := range []string{"String", "Bytes"} {
				var buf bytes.Buffer
				w := NewWriter(&buf)
				if how == "String" {
					w.String(s)
				} else {
					w.Bytes([]byte(s))
				}
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
				if want := reference(t, s); !bytes.Equal(buf.Bytes(), want) {
					t.Fatalf("%s of %q at offset %d differs from encoding/json", how, p, off)
				}
			}
		}
	}
}

func FuzzWriter(f *testing.F) {
	f.Add([]byte("a\xff\xe2\x82\xac"), 3)
	f.Fuzz(func(t *testing.T, piece []byte, repeat int) {
		repeat = 1 + int(uint(repeat)%(3*chunk))
		s := string(bytes.Repeat(piece, repeat))
		var buf bytes.Buffer
		w := NewWriter(&buf)
		w.Bytes([]byte(s))
		w.Flush()
		if want := reference(t, s); !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("Bytes(%q x %d) differs from encoding/json", piece, repeat)
		}
	})
}
