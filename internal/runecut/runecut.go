// Package runecut cuts UTF-8 text to a length in bytes without splitting a
// character, for the readers that bound how much of a message they look at.
package runecut

import "unicode/utf8"

// Prefix returns the longest prefix of s of at most n bytes that does not
// end inside a UTF-8 sequence.
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := max(n, 0)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
