package app_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/app"
	"github.com/mailsink/mailsink/internal/certs"
	"github.com/mailsink/mailsink/internal/testenv"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// startApp starts mailsink with env (see loadConfig) and stops it at the
// end of the test.
func startApp(t *testing.T, env map[string]string) *app.App {
	t.Helper()
	a, err := app.Start(context.Background(), loadConfig(t, env), quietLog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	return a
}

// fetchPEM answers GET /tls/certificate.pem at base over client.
func fetchPEM(t *testing.T, client *http.Client, base string) (int, []byte) {
	t.Helper()
	resp, err := client.Get(base + "/tls/certificate.pem")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func fingerprintOf(t *testing.T, pemBytes []byte) [32]byte {
	t.Helper()
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("not a PEM certificate: %q", pemBytes)
	}
	return sha256.Sum256(block.Bytes)
}

// The generated certificate is kept in the data directory: a restart
// presents the same one (a client may pin it), served on HTTP and HTTPS
// without a key; HTTPS serves the API.
func TestGeneratedCertificateSurvivesARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := func() map[string]string {
		return map[string]string{"MAILSINK_DATA_DIR": dir, "MAILSINK_SMTP_TLS_AUTO": "mailsink.test",
			"MAILSINK_HTTPS_ADDR": "127.0.0.1:0", "MAILSINK_API_KEY": "k"}
	}
	first := startApp(t, env())
	code, firstPEM := fetchPEM(t, http.DefaultClient, "http://"+first.HTTPAddr().String())
	if code != http.StatusOK || strings.Contains(string(firstPEM), "PRIVATE") {
		t.Fatalf("GET /tls/certificate.pem: %d %s", code, firstPEM)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(firstPEM)
	client := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "mailsink.test"}}}
	code, httpsPEM := fetchPEM(t, client, "https://"+first.HTTPSAddr().String())
	if code != http.StatusOK || string(httpsPEM) != string(firstPEM) {
		t.Fatalf("GET /tls/certificate.pem over HTTPS: %d", code)
	}
	req, _ := http.NewRequest(http.MethodGet, "https://"+first.HTTPSAddr().String()+"/v1/emails", nil)
	req.Header.Set("Authorization", "Bearer k")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil || resp.ProtoMajor != 2 {
		t.Fatalf("GET /v1/emails over HTTPS: %d %s", resp.StatusCode, resp.Proto)
	}
	if fi, err := os.Stat(filepath.Join(dir, certs.AutoKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", err, fi)
	}
	if err := first.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	second := startApp(t, env())
	_, secondPEM := fetchPEM(t, http.DefaultClient, "http://"+second.HTTPAddr().String())
	if fingerprintOf(t, secondPEM) != fingerprintOf(t, firstPEM) {
		t.Fatal("the restart made a new certificate")
	}
	if got, want := certs.Fingerprint(second.Certificate().Leaf()), certs.Fingerprint(first.Certificate().Leaf()); got != want {
		t.Fatalf("fingerprint %s, want %s", got, want)
	}
}

// writePair writes a self-signed pair for names, valid from notBefore for
// validity, to certFile and keyFile.
func writePair(t *testing.T, certFile, keyFile string, notBefore time.Time, validity time.Duration) {
	t.Helper()
	c, k, err := certs.SelfSigned([]string{"mailsink.test"}, notBefore, validity)
	if err != nil {
		t.Fatal(err)
	}
	// The key first, as a renewal tool would; rename makes each file whole.
	for _, f := range []struct {
		path string
		data []byte
	}{{keyFile, k}, {certFile, c}} {
		tmp := f.path + ".tmp"
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, f.path); err != nil {
			t.Fatal(err)
		}
	}
}

// A renewed certificate is presented without a restart, on SMTPS as on the
// certificate endpoint.
func TestChangedCertificateFilesAreReloaded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writePair(t, certFile, keyFile, time.Now(), time.Hour)
	a := startApp(t, map[string]string{"MAILSINK_SMTP_TLS_CERT": certFile, "MAILSINK_SMTP_TLS_KEY": keyFile,
		"MAILSINK_SMTPS_ADDR": "127.0.0.1:0", "MAILSINK_API_KEY": "k"})
	presented := func() [32]byte {
		conn, err := tls.Dial("tcp", a.SMTPSAddr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return sha256.Sum256(conn.ConnectionState().PeerCertificates[0].Raw)
	}
	before := presented()
	writePair(t, certFile, keyFile, time.Now(), 2*time.Hour)
	onDisk, _ := os.ReadFile(certFile)
	want := fingerprintOf(t, onDisk)
	if want == before {
		t.Fatal("the new pair equals the old")
	}
	testenv.WaitFor(t, 10*time.Second, "the renewed certificate", func() bool { return presented() == want })
	if _, b := fetchPEM(t, http.DefaultClient, "http://"+a.HTTPAddr().String()); fingerprintOf(t, b) != want {
		t.Error("/tls/certificate.pem serves the old certificate")
	}
}

// Certificate files that cannot work stop start-up with an error naming
// the settings.
func TestBadCertificateFilesStopStartUp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	expired, expiredKey := filepath.Join(dir, "expired.pem"), filepath.Join(dir, "expired-key.pem")
	writePair(t, expired, expiredKey, time.Now().Add(-48*time.Hour), time.Hour)
	good, goodKey := filepath.Join(dir, "good.pem"), filepath.Join(dir, "good-key.pem")
	writePair(t, good, goodKey, time.Now(), time.Hour)
	for _, tc := range []struct {
		name, cert, key, want string
	}{
		{"expired", expired, expiredKey, "expired on"},
		{"mismatched", good, expiredKey, "private key does not match"},
		{"missing", filepath.Join(dir, "none.pem"), goodKey, "no such file"},
	} {
		cfg := loadConfig(t, map[string]string{"MAILSINK_SMTP_TLS_CERT": tc.cert, "MAILSINK_SMTP_TLS_KEY": tc.key, "MAILSINK_API_KEY": "k"})
		a, err := app.Start(context.Background(), cfg, quietLog)
		if err == nil {
			a.Shutdown(context.Background())
			t.Fatalf("%s: started", tc.name)
		}
		if !strings.Contains(err.Error(), "MAILSINK_SMTP_TLS_CERT") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want the setting and %q", tc.name, err, tc.want)
		}
	}
	// A data directory that cannot hold the generated certificate.
	file := filepath.Join(dir, "a-file")
	os.WriteFile(file, nil, 0o600)
	cfg := loadConfig(t, map[string]string{"MAILSINK_SMTP_TLS_AUTO": "mailsink.test", "MAILSINK_API_KEY": "k", "MAILSINK_REDIS_URL": "redis://127.0.0.1:6379/15"})
	cfg.Store.DataDir = filepath.Join(file, "sub")
	if a, err := app.Start(context.Background(), cfg, quietLog); err == nil {
		a.Shutdown(context.Background())
		t.Fatal("started without a place for the certificate")
	} else if !strings.Contains(err.Error(), "MAILSINK_SMTP_TLS_AUTO") {
		t.Errorf("unwritable data directory: %v", err)
	}
}
