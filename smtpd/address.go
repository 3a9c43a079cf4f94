package smtpd

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/emersion/go-smtp"

	"github.com/mailsink/mailsink/store"
)

// The replies to addresses the address rule (store.ValidAddress, the
// README's "SMTP" section) refuses. Each says which address and which part
// of the rule, so that a developer reading a client's error knows what to
// change.

// recipientRefusal returns the reply refusing the RCPT address to, or nil
// when the address rule accepts it.
func recipientRefusal(to string) *smtp.SMTPError {
	if store.ValidAddress(to) {
		return nil
	}
	if !isASCII(to) {
		return needsSMTPUTF8("Recipient", to)
	}
	return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 3},
		Message: fmt.Sprintf("Recipient address <%s> is not accepted: %s", quoteAddress(to), addressProblem(to))}
}

// needsSMTPUTF8 refuses a non-ASCII address (RFC 6531 section 3.5): mailsink
// advertises SMTPUTF8 for UTF-8 headers, but stores ASCII addresses only.
func needsSMTPUTF8(role, addr string) *smtp.SMTPError {
	return &smtp.SMTPError{Code: 553, EnhancedCode: smtp.EnhancedCode{5, 6, 7},
		Message: fmt.Sprintf("%s address <%s> has non-ASCII characters: mailsink accepts ASCII addresses only (UTF-8 is fine in headers)",
			role, quoteAddress(addr))}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// maxQuoted bounds the part of an address repeated in a reply.
const maxQuoted = 80

// quoteAddress returns addr as a reply may repeat it: printable ASCII
// (other bytes as \xNN), at most maxQuoted bytes of it.
func quoteAddress(addr string) string {
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

// addressProblem says which part of the address rule the ASCII address s
// breaks; it follows store.ValidAddress's checks in order.
func addressProblem(s string) string {
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
func isAlnum(c byte) bool  { return isLetter(c) || c >= '0' && c <= '9' }
