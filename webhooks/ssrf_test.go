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
