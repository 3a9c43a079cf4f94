package store

import "strings"

// ValidAddress reports whether s satisfies the API's email address rule (the
// README's "SMTP" section and the OpenAPI document): a local part of ASCII letters, digits and _ ' + - . that does
// not start with a dot, holds no two consecutive dots and ends in a letter,
// digit, _, + or -; then @; then one or more labels that start with a letter
// or digit and go on with letters, digits or hyphens, each followed by a dot;
// then a final label of at least two letters.
func ValidAddress(s string) bool {
	at := strings.IndexByte(s, '@')
	if at <= 0 || strings.Contains(s, "..") {
		return false
	}
	local, domain := s[:at], s[at+1:]
	if local[0] == '.' {
		return false
	}
	for i := 0; i < len(local); i++ {
		c := local[i]
		if !isAlnum(c) && c != '_' && c != '\'' && c != '+' && c != '-' && c != '.' {
			return false
		}
	}
	if last := local[len(local)-1]; last == '.' || last == '\'' {
		return false
	}
	dot := strings.LastIndexByte(domain, '.')
	if dot <= 0 {
		return false
	}
	tld := domain[dot+1:]
	if len(tld) < 2 {
		return false
	}
	for i := 0; i < len(tld); i++ {
		if !isLetter(tld[i]) {
			return false
		}
	}
	for _, label := range strings.Split(domain[:dot], ".") {
		if label == "" || !isAlnum(label[0]) {
			return false
		}
		for i := 1; i < len(label); i++ {
			if !isAlnum(label[i]) && label[i] != '-' {
				return false
			}
		}
	}
	return true
}

// NormalizeAddress returns the form of an address that filters and indexes
// compare: lower case. Addresses are stored as received.
func NormalizeAddress(s string) string { return strings.ToLower(s) }

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isAlnum(c byte) bool  { return isLetter(c) || isDigit(c) }
