package clientaddr

import "testing"

func TestFromForwarded(t *testing.T) {
	t.Parallel()
	trusted, err := Parse("10.0.0.0/8, 127.0.0.1, ::1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"untrusted peer keeps its address", "203.0.113.9:5000", []string{"198.51.100.1"}, "203.0.113.9"},
		{"trusted peer, one hop", "10.1.2.3:443", []string{"198.51.100.1"}, "198.51.100.1"},
		{"a chain of trusted proxies", "127.0.0.1:80", []string{"198.51.100.1, 10.0.0.5", "10.0.0.6"}, "198.51.100.1"},
		{"a forged left part is not believed", "10.1.2.3:443", []string{"1.2.3.4, 198.51.100.1"}, "198.51.100.1"},
		{"no header", "10.1.2.3:443", nil, "10.1.2.3"},
		{"garbage", "10.1.2.3:443", []string{"not-an-ip"}, "10.1.2.3"},
		{"only proxies", "10.1.2.3:443", []string{"10.9.9.9"}, "10.9.9.9"},
		{"ipv6 peer", "[::1]:80", []string{"2001:db8::7"}, "2001:db8::7"},
		{"ipv4-mapped", "[::ffff:10.0.0.1]:80", []string{"[2001:db8::7]:1234"}, "2001:db8::7"},
	} {
		if got := trusted.FromForwarded(tt.peer, tt.xff); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, got, tt.want)
		}
	}
	if got := (Trusted{}).FromForwarded("10.1.2.3:443", []string{"198.51.100.1"}); got != "10.1.2.3" {
		t.Errorf("trusting no one: got %s", got)
	}
	if _, err := Parse("10.0.0.0/33"); err == nil {
		t.Error("a bad CIDR was accepted")
	}
}

func TestBucket(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"192.0.2.7":            "192.0.2.7",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"2001:db8:1:2::ffff":   "2001:db8:1:2::/64",
		"::ffff:192.0.2.7":     "::ffff:192.0.2.7",
		"not an address":       "not an address",
	} {
		if got := Bucket(in); got != want {
			t.Errorf("Bucket(%q) = %q, want %q", in, got, want)
		}
	}
}
