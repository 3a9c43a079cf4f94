package certs

import (
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func writePair(t *testing.T, dir string, names []string, now time.Time, validity time.Duration) (certFile, keyFile string) {
	t.Helper()
	c, k, err := SelfSigned(names, now, validity)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := writeFile(certFile, c, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(keyFile, k, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestLoadRefusesBadPairs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, goodKey := writePair(t, t.TempDir(), []string{"a.test"}, time.Now(), time.Hour)
	expired, expiredKey := writePair(t, t.TempDir(), []string{"a.test"}, time.Now().Add(-48*time.Hour), time.Hour)
	_, otherKey := writePair(t, t.TempDir(), []string{"a.test"}, time.Now(), time.Hour)
	garbage := filepath.Join(dir, "garbage.pem")
	os.WriteFile(garbage, []byte("not a certificate"), 0o644)
	for _, tc := range []struct {
		name, cert, key, want string
	}{
		{"expired", expired, expiredKey, "expired on"},
		{"mismatched", good, otherKey, "private key does not match public key"},
		{"garbage", garbage, goodKey, "failed to find any PEM data"},
		{"missing", filepath.Join(dir, "none.pem"), goodKey, "no such file"},
	} {
		if _, err := Load(tc.cert, tc.key, quiet); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := Load(good, goodKey, quiet); err != nil {
		t.Fatalf("good pair: %v", err)
	}
}

func TestAutoKeepsItsCertificateUntilTheNamesChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, made, err := Auto(dir, []string{"mailsink.test"}, quiet)
	if err != nil || !made {
		t.Fatalf("first Auto: made %v, err %v", made, err)
	}
	if got, want := certNames(first.Leaf()), []string{"127.0.0.1", "::1", "localhost", "mailsink.test"}; !equal(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
	if fi, err := os.Stat(filepath.Join(dir, AutoKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v, mode %v; want 0600", err, fi.Mode())
	}
	again, made, err := Auto(dir, []string{"MAILSINK.test "}, quiet)
	if err != nil || made {
		t.Fatalf("second Auto: made %v, err %v", made, err)
	}
	if Fingerprint(again.Leaf()) != Fingerprint(first.Leaf()) {
		t.Error("the kept certificate was replaced")
	}
	other, made, err := Auto(dir, []string{"mailsink.test", "other.test"}, quiet)
	if err != nil || !made {
		t.Fatalf("Auto with new names: made %v, err %v", made, err)
	}
	if Fingerprint(other.Leaf()) == Fingerprint(first.Leaf()) {
		t.Error("new names kept the old certificate")
	}
	if err := other.Leaf().VerifyHostname("other.test"); err != nil {
		t.Error(err)
	}
}

func equal(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

func TestSourceReloadsChangedFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := writePair(t, dir, []string{"a.test"}, time.Now(), time.Hour)
	s, err := Load(certFile, keyFile, quiet)
	if err != nil {
		t.Fatal(err)
	}
	before := Fingerprint(s.Leaf())
	// A half-done renewal (new certificate, old key) keeps the old pair.
	c, k, _ := SelfSigned([]string{"b.test"}, time.Now(), time.Hour)
	writeFile(certFile, c, 0o644)
	s.mu.Lock()
	s.checked = time.Time{}
	s.mu.Unlock()
	if got := Fingerprint(s.Leaf()); got != before {
		t.Fatalf("a mismatched pair replaced the certificate")
	}
	writeFile(keyFile, k, 0o600)
	deadline := time.Now().Add(10 * time.Second)
	for Fingerprint(s.Leaf()) == before {
		if time.Now().After(deadline) {
			t.Fatal("the renewed pair was not loaded")
		}
		time.Sleep(50 * time.Millisecond)
	}
	block, _ := pem.Decode(s.PEM())
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil || leaf.DNSNames[0] != "b.test" {
		t.Fatalf("PEM: %v %v", err, leaf)
	}
}

func TestFingerprintLooksLikeOpenSSL(t *testing.T) {
	t.Parallel()
	s, _, err := Auto(t.TempDir(), nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	fp := Fingerprint(s.Leaf())
	if len(fp) != 32*3-1 || strings.ToUpper(fp) != fp || strings.Count(fp, ":") != 31 {
		t.Errorf("fingerprint %q", fp)
	}
}

// TestEphemeralIsNewAtEachStart: a certificate kept in memory names the
// hosts, has no file, and is another one each time.
func TestEphemeralIsNewAtEachStart(t *testing.T) {
	t.Parallel()
	first, err := Ephemeral([]string{"mailsink.test"}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Leaf().VerifyHostname("mailsink.test"); err != nil {
		t.Error(err)
	}
	if first.CertFile() != "" || !strings.Contains(string(first.PEM()), "BEGIN CERTIFICATE") {
		t.Errorf("CertFile %q, PEM %q; want no file and the certificate", first.CertFile(), first.PEM())
	}
	second, err := Ephemeral([]string{"mailsink.test"}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if Fingerprint(second.Leaf()) == Fingerprint(first.Leaf()) {
		t.Error("the second start has the first start's certificate")
	}
}
