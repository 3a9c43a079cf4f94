package store

import (
	"strings"
	"testing"
)

// TestAddressProblemIPLiteral: a domain in brackets is named as the IP
// literal it is; a bracket elsewhere is not taken for one.
func TestAddressProblemIPLiteral(t *testing.T) {
	for _, tc := range []struct {
		addr    string
		literal bool
	}{
		{"a@[10.0.0.1]", true},
		{"a@[IPv6:2001:db8::1]", true},
		{"a@[x].com", false},
		{"a@[10.0.0.1", false},
	} {
		p := AddressProblem(tc.addr)
		if p == "" {
			t.Errorf("%q: no problem found", tc.addr)
		}
		if got := strings.Contains(p, "IP literal:"); got != tc.literal {
			t.Errorf("%q: %q, want an IP literal named: %v", tc.addr, p, tc.literal)
		}
	}
}
