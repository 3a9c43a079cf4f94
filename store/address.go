package store

import (
	"fmt"
	"strings"
)

// ValidAddress reports whether s satisfies the API's email address rule (the
// docs/smtp.md and the OpenAPI document): a local part of ASCII letters, digits and _ ' + - . that does
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

// maxQuoted bounds the part of an address that QuoteAddress repeats.
const maxQuoted = 80

// QuoteAddress returns addr as an SMTP reply or an error message may repeat
// it: printable ASCII (other bytes as \xNN), at most maxQuoted bytes of it.
func QuoteAddress(addr string) string {
	var b strings.Builder
	for i := 0; i < len(addr) && b.Len() < maxQuoted; i++ {
		if c := addr[i]; c >= 0x20 && c < 0x7f {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "\\x%02X", c)
		}
	}
	if b.Len() >= maxQuoted {
		return b.String()[:maxQuoted] + "..."
	}
	return b.String()
}

// AddressProblem says which part of the address rule (ValidAddress) s
// breaks, in words a developer can act on; it follows ValidAddress's checks
// in order, and is meant for an address ValidAddress refuses.
func AddressProblem(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return "it has non-ASCII characters: mailsink accepts ASCII addresses only (UTF-8 is fine in headers)"
		}
	}
	at := strings.IndexByte(s, '@')
	switch {
	case at < 0:
		return "it has no @ (the form is local-part@domain.tld)"
	case at == 0:
		return "the local part before @ is empty"
	case strings.Contains(s, ".."):
		return "it has two dots in a row"
	}
	local, domain := s[:at], s[at+1:]
	if local[0] == '.' {
		return "the local part starts with a dot"
	}
	for i := 0; i < len(local); i++ {
		if c := local[i]; !isAlnum(c) && !strings.ContainsRune("_'+-.", rune(c)) {
			return fmt.Sprintf("the local part has %q: it may hold letters, digits and _ ' + - . only (no quoted local parts)", c)
		}
	}
	if last := local[len(local)-1]; last == '.' || last == '\'' {
		return fmt.Sprintf("the local part ends in %q", last)
	}
	if strings.HasPrefix(domain, "[") && strings.HasSuffix(domain, "]") {
		return fmt.Sprintf("the domain %q is an IP literal: mailsink accepts domain names only, like example.com", domain)
	}
	dot := strings.LastIndexByte(domain, '.')
	if dot <= 0 {
		return fmt.Sprintf("the domain %q has no dot: it needs a top-level label, like example.com (IP literals are not accepted)", domain)
	}
	tld := domain[dot+1:]
	for i := 0; i < len(tld); i++ {
		if !isLetter(tld[i]) {
			return fmt.Sprintf("the top-level label %q may hold letters only", tld)
		}
	}
	if len(tld) < 2 {
		return fmt.Sprintf("the top-level label %q is shorter than two letters", tld)
	}
	for _, label := range strings.Split(domain[:dot], ".") {
		if label == "" || !isAlnum(label[0]) {
			return fmt.Sprintf("the domain label %q does not start with a letter or digit", label)
		}
		for i := 1; i < len(label); i++ {
			if !isAlnum(label[i]) && label[i] != '-' {
				return fmt.Sprintf("the domain label %q has %q: labels hold letters, digits and hyphens only", label, label[i])
			}
		}
	}
	return "it does not follow the address rule"
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isAlnum(c byte) bool  { return isLetter(c) || isDigit(c) }
