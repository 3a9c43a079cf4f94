package smtpd

import (
	"fmt"
	"unicode/utf8"

	"github.com/emersion/go-smtp"

	"github.com/mailsink/mailsink/store"
)

// The replies to addresses the address rule (store.ValidAddress, the
// docs/smtp.md) refuses. Each says which address and which part
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
		Message: fmt.Sprintf("Recipient address <%s> is not accepted: %s", store.QuoteAddress(to), store.AddressProblem(to))}
}

// needsSMTPUTF8 refuses a non-ASCII address (RFC 6531 section 3.5): mailsink
// advertises SMTPUTF8 for UTF-8 headers, but stores ASCII addresses only.
func needsSMTPUTF8(role, addr string) *smtp.SMTPError {
	return &smtp.SMTPError{Code: 553, EnhancedCode: smtp.EnhancedCode{5, 6, 7},
		Message: fmt.Sprintf("%s address <%s> has non-ASCII characters: mailsink accepts ASCII addresses only (UTF-8 is fine in headers)",
			role, store.QuoteAddress(addr))}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
