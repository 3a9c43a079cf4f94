package webhooks

import (
	"net/netip"
	"strings"
	"testing"
)

func TestCheckAddr(t *testing.T) {
	tests := []struct {
		addr                   string
		public, privateAllowed bool // allowed without and with the opt-in
	}{
		{"93.184.216.34", true, true},
		{"2606:4700::1111", true, true},
		{"169.254.169.254", false, false},
		{"169.254.0.1", false, false},
		{"100.100.100.200", false, false},
		{"fd00:ec2::254", false, false},
		{"fe80::1", false, false},
		{"::ffff:169.254.169.254", false, false},
		{"64:ff9b::a9fe:a9fe", false, false}, // NAT64 of 169.254.169.254
		{"0.0.0.0", false, false},
		{"::", false, false},
		{"224.0.0.1", false, false},
		{"127.0.0.1", false, true},
		{"::1", false, true},
		{"10.1.2.3", false, true},
		{"172.16.0.1", false, true},
		{"192.168.1.1", false, true},
		{"100.64.0.1", false, true},
		{"fd12:3456::1", false, true},
		{"::ffff:127.0.0.1", false, true},
		{"fec0::1", false, false}, // site-local
		{"feff:ffff::1", false, false},
	}
	for _, tt := range tests {
		a := netip.MustParseAddr(tt.addr)
		if got := CheckAddr(a, false) == nil; got != tt.public {
			t.Errorf("CheckAddr(%s, false) allowed = %v, want %v", tt.addr, got, tt.public)
		}
		if got := CheckAddr(a, true) == nil; got != tt.privateAllowed {
			t.Errorf("CheckAddr(%s, true) allowed = %v, want %v", tt.addr, got, tt.privateAllowed)
		}
	}
}

func TestCheckURL(t *testing.T) {
	tests := []struct {
		url, wantErr string
	}{
		{"https://hooks.example.com/x?y=1", ""},
		{"http://hooks.example.com:8080/x", ""},
		{"ftp://hooks.example.com/x", "http or https"},
		{"javascript:alert(1)", "http or https"},
		{"hooks.example.com/x", "http or https"},
		{"https:///x", "with a host"},
		{"https://user:pw@hooks.example.com/", "user info"},
		{"https://hooks.example.com:99999/", "invalid port"},
		{"http://169.254.169.254/latest/meta-data", "refused address"},
		{"http://[fd00:ec2::254]/", "refused address"},
		{"http://127.0.0.1:8080/", "refused address"},
		{"http://10.0.0.1/", "refused address"},
		{"https://hooks.example.com/" + strings.Repeat("a", 2048), "at most 2048 bytes"},
		{"http://%zz/", "absolute"},
	}
	for _, tt := range tests {
		err := CheckURL(tt.url, 2048, false)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("CheckURL(%q) = %v, want nil", tt.url, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("CheckURL(%q) = %v, want an error with %q", tt.url, err, tt.wantErr)
		}
	}
	if err := CheckURL("http://127.0.0.1:8080/", 2048, true); err != nil {
		t.Errorf("loopback with the opt-in: %v", err)
	}
	if err := CheckURL("http://169.254.169.254/", 2048, true); err == nil {
		t.Error("metadata address allowed with the opt-in")
	}
}

// TestCheckAddrEmbeddedIPv4: an IPv6 address that carries an IPv4 address
// (translators and tunnels deliver to it) is refused as that IPv4 address
// would be, and allowed when that one is public.
func TestCheckAddrEmbeddedIPv4(t *testing.T) {
	tests := []struct {
		name, addr             string
		public, privateAllowed bool // allowed without and with the opt-in
		carries                string
	}{
		{"IPv4-mapped loopback", "::ffff:127.0.0.1", false, true, "127.0.0.1"},
		{"IPv4-mapped metadata", "::ffff:a9fe:a9fe", false, false, "169.254.169.254"},
		{"IPv4-mapped public", "::ffff:93.184.216.34", true, true, ""},
		{"IPv4-translated private", "::ffff:0:10.1.2.3", false, true, "10.1.2.3"},
		{"IPv4-translated public", "::ffff:0:93.184.216.34", true, true, ""},
		{"IPv4-compatible loopback", "::127.0.0.1", false, true, "127.0.0.1"},
		{"IPv4-compatible private", "::10.0.0.1", false, true, "10.0.0.1"},
		{"IPv4-compatible metadata", "::169.254.169.254", false, false, "169.254.169.254"},
		{"IPv4-compatible public", "::93.184.216.34", true, true, ""},
		{"IPv6 loopback is not IPv4-compatible", "::1", false, true, ""},
		{"NAT64 loopback", "64:ff9b::127.0.0.1", false, true, "127.0.0.1"},
		{"NAT64 private", "64:ff9b::a00:1", false, true, "10.0.0.1"},
		{"NAT64 metadata", "64:ff9b::a9fe:a9fe", false, false, "169.254.169.254"},
		{"NAT64 public", "64:ff9b::5db8:d822", true, true, ""},
		{"6to4 loopback", "2002:7f00:1::", false, true, "127.0.0.1"},
		{"6to4 private, host part set", "2002:a01:203:1::5", false, true, "10.1.2.3"},
		{"6to4 metadata", "2002:a9fe:a9fe::1", false, false, "169.254.169.254"},
		{"6to4 public", "2002:5db8:d822::1", true, true, ""},
		{"Teredo loopback client", "2001:0:4136:e378:8000:63bf:80ff:fffe", false, true, "127.0.0.1"},
		{"Teredo private client", "2001:0:4136:e378:8000:63bf:f5ff:fffe", false, true, "10.0.0.1"},
		{"Teredo metadata client", "2001:0:4136:e378:8000:63bf:5601:5601", false, false, "169.254.169.254"},
		{"Teredo public client", "2001:0:4136:e378:8000:63bf:a247:27dd", true, true, ""},
		{"outside Teredo's /32", "2001:db9::a9fe:a9fe", true, true, ""},
		{"site-local", "fec0::a9fe:a9fe", false, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := netip.MustParseAddr(tt.addr)
			err := CheckAddr(a, false)
			if got := err == nil; got != tt.public {
				t.Errorf("CheckAddr(%s, false) = %v, want allowed %v", tt.addr, err, tt.public)
			}
			if got := CheckAddr(a, true) == nil; got != tt.privateAllowed {
				t.Errorf("CheckAddr(%s, true) allowed = %v, want %v", tt.addr, got, tt.privateAllowed)
			}
			if tt.carries != "" && (err == nil || !strings.Contains(err.Error(), "carries "+tt.carries+" ")) {
				t.Errorf("CheckAddr(%s, false) = %v, want it to name %s", tt.addr, err, tt.carries)
			}
			if !tt.public {
				if err := CheckURL("http://["+tt.addr+"]:8080/hook", 2048, false); err == nil || !strings.Contains(err.Error(), "refused address") {
					t.Errorf("CheckURL with host [%s] = %v, want a refused address", tt.addr, err)
				}
			}
		})
	}
}
