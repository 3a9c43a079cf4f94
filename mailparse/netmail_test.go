package mailparse

import (
	"net/mail"
	"path/filepath"
	"strings"
	"testing"
)

// TestAgreesWithNetMail cross-checks the lenient address and date parsers
// with the strict ones of net/mail on every fixture header that net/mail
// accepts: where the standard library has an answer, it must be ours too.
func TestAgreesWithNetMail(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, rel := range fixtures(t) {
		hdr, _ := splitHeader(readFixture(t, rel), true)
		sc := fieldScanner{rest: hdr}
		for {
			name, value, ok := sc.next()
			if !ok {
				break
			}
			switch lowerASCII(name) {
			case "from", "to", "cc", "reply-to", "sender":
				list, err := mail.ParseAddressList(string(unfold(value)))
				if err != nil {
					continue
				}
				var want []string
				for _, a := range list {
					want = append(want, a.Address)
				}
				got := appendAddresses(nil, value)
				if strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("%s: %s %q: got %q, net/mail %q", filepath.ToSlash(rel), name, value, got, want)
				}
				checked++
			case "date", "resent-date":
				want, err := mail.ParseDate(string(unfold(value)))
				if err != nil {
					continue
				}
				got, ok := parseDate(value)
				if !ok || !got.Equal(want) {
					t.Errorf("%s: %s %q: got %v (ok %v), net/mail %v", filepath.ToSlash(rel), name, value, got, ok, want)
				}
				checked++
			}
		}
	}
	if checked < 100 {
		t.Errorf("only %d headers checked", checked)
	}
}
