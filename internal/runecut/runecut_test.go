package runecut

import (
	"testing"
	"unicode/utf8"
)

func TestPrefix(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abc", 2, "ab"},
		{"abc", 0, ""},
		{"aé", 2, "a"},
		{"aé", 3, "aé"},
		{"€€", 4, "€"},
		{"😀x", 3, ""},
		{"\xff\xffa", 1, "\xff"},
	}
	for _, tt := range tests {
		if got := Prefix(tt.s, tt.n); got != tt.want {
			t.Errorf("Prefix(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

func FuzzPrefix(f *testing.F) {
	f.Add("aé€😀", 3)
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := Prefix(s, n)
		if len(got) > max(n, 0) || len(s) > len(got) && len(s) <= n || s[:len(got)] != got {
			t.Fatalf("Prefix(%q, %d) = %q", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Prefix(%q, %d) = %q splits a character", s, n, got)
		}
	})
}
