package mailparse

import "testing"

// base64Size must agree with decoding, on the fast path (padding only at
// the end) and on input that takes the slow one.
func TestBase64Size(t *testing.T) {
	for _, src := range []string{
		"", "QQ", "QUI", "QUJD", "QUJDRA", "QUJDRA==", "QUJDRA==\r\n", "QUJD\r\nREVG\r\n",
		"QQ==QUI=", "QQ==\r\nQUJD", "=QUJD", "QU JD!!RA=", "QUJDRA=x", "Q=U=J=D", "====", "QUJDREVG=",
	} {
		if got, want := base64Size([]byte(src)), len(decodeBase64(nil, []byte(src))); got != want {
			t.Errorf("base64Size(%q) = %d, want %d", src, got, want)
		}
	}
}

func FuzzBase64Size(f *testing.F) {
	f.Add([]byte("QUJDRA==\r\n"))
	f.Add([]byte("QQ==QUI="))
	f.Fuzz(func(t *testing.T, src []byte) {
		if got, want := base64Size(src), len(decodeBase64(nil, src)); got != want {
			t.Errorf("base64Size(%q) = %d, want %d", src, got, want)
		}
	})
}
