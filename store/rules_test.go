package store

import "testing"

func TestValidAddress(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want bool
	}{
		{"user@example.com", true},
		{"User.Name+tag@Sub.Example.CO", true},
		{"o'brien@example.ie", true},
		{"a_b-c@ex-ample.org", true},
		{"x@a.bc", true},
		{"1@1.io", true},
		{"user-@example.com", true},
		{"user_@example.com", true},
		{"user+@example.com", true},
		{"u@xn--bcher-kva.example", true},
		{"", false},
		{"plainaddress", false},
		{"@example.com", false},
		{"user@", false},
		{".user@example.com", false},
		{"user.@example.com", false},
		{"user'@example.com", false},
		{"us..er@example.com", false},
		{"user@example..com", false},
		{"user@.example.com", false},
		{"user@-example.com", false},
		{"user@example", false},
		{"user@example.c", false},
		{"user@example.c0m", false},
		{"user@example.com.", false},
		{"us er@example.com", false},
		{"user@exa mple.com", false},
		{"user@@example.com", false},
		{"a@b@example.com", false},
		{"user@exa_mple.com", false},
		{"üser@example.com", false},
		{"user@exämple.com", false},
		{"\"quoted\"@example.com", false},
		{"user@[127.0.0.1]", false},
		{"user@127.0.0.1", false},
		{"<user@example.com>", false},
		{"user@example.com\n", false},
	}
	for _, tt := range tests {
		if got := ValidAddress(tt.in); got != tt.want {
			t.Errorf("ValidAddress(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestValidID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want bool
	}{
		{"0190b6d2-7c3e-7a1b-8c2d-1234567890ab", true},
		{"0190B6D2-7C3E-7A1B-BC2D-1234567890AB", true},
		{"123e4567-e89b-12d3-a456-426614174000", true},
		{"123e4567-e89b-82d3-9456-426614174000", true},
		{"00000000-0000-0000-0000-000000000000", true},
		{"ffffffff-ffff-ffff-ffff-ffffffffffff", true},
		{"FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", true},
		{"", false},
		{"not-a-uuid", false},
		{"123e4567-e89b-02d3-a456-426614174000", false}, // version 0
		{"123e4567-e89b-92d3-a456-426614174000", false}, // version 9
		{"123e4567-e89b-12d3-c456-426614174000", false}, // variant c
		{"123e4567-e89b-12d3-7456-426614174000", false}, // variant 7
		{"123e4567e89b12d3a456426614174000", false},     // no hyphens
		{"123e4567-e89b-12d3-a456-42661417400", false},  // short
		{"123e4567-e89b-12d3-a456-4266141740000", false},
		{"123e4567-e89b-12d3-a456-42661417400g", false},
		{"{123e4567-e89b-12d3-a456-426614174000}", false},
		{"123e4567_e89b_12d3_a456_426614174000", false},
	}
	for _, tt := range tests {
		if got := ValidID(tt.in); got != tt.want {
			t.Errorf("ValidID(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
	if id := NewID(); !ValidID(id) || id != NormalizeID(id) {
		t.Errorf("NewID() = %q: want a valid lower-case id", id)
	}
}

func FuzzValidAddress(f *testing.F) {
	for _, s := range []string{"user@example.com", "a..b@x.io", "'@x.io", "x@y.z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ValidAddress(s) {
			// Whatever passes is printable ASCII with exactly one @.
			for i := 0; i < len(s); i++ {
				if s[i] <= ' ' || s[i] >= 0x7f {
					t.Fatalf("accepted %q with byte %#x", s, s[i])
				}
			}
		}
	})
}

// BenchmarkValidation measures the rules every SMTP recipient, sender and
// API id goes through.
func BenchmarkValidation(b *testing.B) {
	b.Run("ValidAddress", func(b *testing.B) {
		addrs := []string{"user@example.com", "User.Name+tag@Sub.Example.CO", "not an address", "a@b", "x@" + string(make([]byte, 300))}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			ValidAddress(addrs[i%len(addrs)])
		}
	})
	b.Run("ValidID", func(b *testing.B) {
		ids := []string{"0190b6d2-7c3e-7a1b-8c2d-000000000001", "0190B6D2-7C3E-7A1B-8C2D-000000000001", "nope"}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			ValidID(ids[i%len(ids)])
		}
	})
}
