package smtpd

import (
	"strings"
	"testing"

	"github.com/mailsink/mailsink/store"
)

// Every address the rule refuses gets a reason of its own (never the
// fallback), and the reply names the address.
func TestAddressRefusalsSayWhy(t *testing.T) {
	for _, tc := range []struct {
		addr, want string
	}{
		{"user", "no @"},
		{"@acme.test", "local part before @ is empty"},
		{"a..b@acme.test", "two dots in a row"},
		{".a@acme.test", "starts with a dot"},
		{`"a b"@acme.test`, `has '"'`},
		{"a(b)@acme.test", `has '('`},
		{"a.@acme.test", `ends in '.'`},
		{"a'@acme.test", `ends in '\''`},
		{"user@localhost", `"localhost" has no dot`},
		{"user@[127.0.0.1]", `"[127.0.0.1]" is an IP literal`},
		{"user@[IPv6:::1]", `"[IPv6:::1]" is an IP literal`},
		{"user@acme.t", `"t" is shorter than two letters`},
		{"user@acme.c0m", `"c0m" may hold letters only`},
		{"user@-acme.test", `"-acme" does not start`},
		{"user@ac_me.test", `"ac_me" has '_'`},
		{"user@acme..test", "two dots"},
		{"a@b@acme.test", `"b@acme" has '@'`},
	} {
		if store.ValidAddress(tc.addr) {
			t.Fatalf("%q is valid", tc.addr)
		}
		r := recipientRefusal(tc.addr)
		if r == nil || r.Code != 550 || r.EnhancedCode != [3]int{5, 1, 3} {
			t.Fatalf("%q: %v, want 550 5.1.3", tc.addr, r)
		}
		if !strings.Contains(r.Message, "<"+tc.addr+">") || !strings.Contains(r.Message, tc.want) {
			t.Errorf("%q: %q, want the address and %q", tc.addr, r.Message, tc.want)
		}
		if strings.Contains(r.Message, "does not follow the address rule") {
			t.Errorf("%q: the fallback reason", tc.addr)
		}
	}
	for _, ok := range []string{"qa@acme.test", "O'Brien+x_y-z.w@mail.acme.test", "1@2.io"} {
		if r := recipientRefusal(ok); r != nil {
			t.Errorf("%q refused: %v", ok, r)
		}
	}
}

func TestNonASCIIAddressesNeedSMTPUTF8(t *testing.T) {
	for _, addr := range []string{"josé@acme.test", "qa@bücher.test", "用户@例子.测试"} {
		r := recipientRefusal(addr)
		if r == nil || r.Code != 553 || r.EnhancedCode != [3]int{5, 6, 7} {
			t.Fatalf("%q: %v, want 553 5.6.7", addr, r)
		}
		if !strings.Contains(r.Message, "non-ASCII") || !strings.Contains(r.Message, "Recipient address <") {
			t.Errorf("%q: %q", addr, r.Message)
		}
		if !isASCII(r.Message) {
			t.Errorf("%q: the reply is not ASCII: %q", addr, r.Message)
		}
	}
	long := recipientRefusal(strings.Repeat("x", 5000) + "@acme")
	if len(long.Message) > 300 {
		t.Errorf("a long address is repeated whole: %d bytes", len(long.Message))
	}
}
