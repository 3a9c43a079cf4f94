// Package certs provides the TLS certificate that mailsink's SMTP (STARTTLS
// and implicit TLS) and HTTPS listeners present: a PEM pair from files, or a
// self-signed certificate made once and kept in the data directory so that
// clients can pin it (or, with no data directory, made at each start and
// kept in memory). A Source rereads its files when they change, so a
// renewed certificate is served without a restart.
package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Auto certificates: the file names in the data directory, how long one is
// valid (Apple's clients refuse server certificates valid for more than 825
// days), and how long before its end a new one is made.
const (
	AutoCertFile = "tls-cert.pem"
	AutoKeyFile  = "tls-key.pem"
	autoValidity = 800 * 24 * time.Hour
	autoRenew    = 30 * 24 * time.Hour
)

// Source is the certificate in use. Its methods are safe for concurrent use.
type Source struct {
	certFile, keyFile string
	log               *slog.Logger
	now               func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   fileStamp // of the files cert was read from
	checked time.Time // when the files were last looked at
}

// fileStamp tells whether a file changed: its modification time and size.
type fileStamp struct {
	certMod, keyMod   time.Time
	certSize, keySize int64
}

// recheck is how often, at most, a Source looks at its files again.
const recheck = time.Second

// Load reads the PEM pair certFile and keyFile. It fails when either cannot
// be read, the key does not belong to the certificate, or the certificate is
// not valid now (expired or not yet valid).
func Load(certFile, keyFile string, log *slog.Logger) (*Source, error) {
	s := &Source{certFile: certFile, keyFile: keyFile, log: log, now: time.Now}
	cert, stamp, err := s.read()
	if err != nil {
		return nil, err
	}
	s.cert, s.stamp, s.checked = cert, stamp, s.now()
	return s, nil
}

// Auto returns the self-signed certificate for hosts (and localhost,
// 127.0.0.1 and ::1) kept in dir, making it (ECDSA P-256, key file mode 0600)
// when there is none, when it names other hosts, or when it ends within 30
// days. The same certificate therefore survives restarts and can be pinned.
func Auto(dir string, hosts []string, log *slog.Logger) (s *Source, made bool, err error) {
	names := autoNames(hosts)
	certFile, keyFile := filepath.Join(dir, AutoCertFile), filepath.Join(dir, AutoKeyFile)
	if old, err := Load(certFile, keyFile, log); err == nil {
		leaf := old.cert.Leaf
		if slices.Equal(certNames(leaf), names) && time.Until(leaf.NotAfter) > autoRenew {
			return old, false, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		log.Warn("making a new TLS certificate: the one kept in the data directory is unusable", "err", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, false, err
	}
	certPEM, keyPEM, err := SelfSigned(names, time.Now(), autoValidity)
	if err != nil {
		return nil, false, err
	}
	// The key first: a Source that sees a new certificate beside an old key
	// keeps its pair until both match.
	if err := writeFile(keyFile, keyPEM, 0o600); err != nil {
		return nil, false, err
	}
	if err := writeFile(certFile, certPEM, 0o644); err != nil {
		return nil, false, err
	}
	s, err = Load(certFile, keyFile, log)
	return s, err == nil, err
}

// Ephemeral returns a self-signed certificate for hosts (and localhost,
// 127.0.0.1 and ::1) made now and kept only in memory, for a mailsink that
// writes nothing to disk (MAILSINK_DATA_DIR=:memory:): each start makes a
// new one. Its CertFile is empty.
func Ephemeral(hosts []string, log *slog.Logger) (*Source, error) {
	certPEM, keyPEM, err := SelfSigned(autoNames(hosts), time.Now(), autoValidity)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &Source{log: log, now: time.Now, cert: &cert}, nil
}

// autoNames returns the names an auto certificate is made for: hosts and the
// loopback names, lower case, sorted, without repeats.
func autoNames(hosts []string) []string {
	names := []string{"localhost", "127.0.0.1", "::1"}
	for _, h := range hosts {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
			names = append(names, h)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// certNames returns the DNS names and IP addresses c is valid for, as
// autoNames orders them.
func certNames(c *x509.Certificate) []string {
	names := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	for i := range names {
		names[i] = strings.ToLower(names[i])
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// SelfSigned makes a self-signed ECDSA P-256 server certificate for names
// (host names or IP addresses), valid from now for validity, and returns it
// and its key as PEM.
func SelfSigned(names []string, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	keyID := sha256.Sum256(pub)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "mailsink self-signed", Organization: []string{"mailsink"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		SubjectKeyId:          keyID[:20],
		AuthorityKeyId:        keyID[:20],
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// writeFile replaces path with data through a temporary file, so that a
// reader never sees half a file.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	err = errors.Join(err, tmp.Chmod(mode), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// read loads and checks the pair from the files.
func (s *Source) read() (*tls.Certificate, fileStamp, error) {
	stamp, err := s.stampNow()
	if err != nil {
		return nil, stamp, err
	}
	cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err != nil {
		return nil, stamp, fmt.Errorf("certificate %s and key %s: %w", s.certFile, s.keyFile, err)
	}
	now := s.now()
	switch leaf := cert.Leaf; {
	case now.After(leaf.NotAfter):
		return nil, stamp, fmt.Errorf("certificate %s expired on %s", s.certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return nil, stamp, fmt.Errorf("certificate %s is not valid before %s", s.certFile, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return &cert, stamp, nil
}

func (s *Source) stampNow() (fileStamp, error) {
	ci, err := os.Stat(s.certFile)
	if err != nil {
		return fileStamp{}, err
	}
	ki, err := os.Stat(s.keyFile)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{certMod: ci.ModTime(), keyMod: ki.ModTime(), certSize: ci.Size(), keySize: ki.Size()}, nil
}

// current returns the certificate in use, first rereading the files when
// they changed (looking at most once a second). A changed pair that does not
// load (half written, mismatched, expired) is logged and the old one kept;
// the next look tries again.
func (s *Source) current() *tls.Certificate {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.certFile == "" || now.Sub(s.checked) < recheck {
		return s.cert
	}
	s.checked = now
	stamp, err := s.stampNow()
	if err != nil || stamp == s.stamp {
		return s.cert
	}
	cert, stamp, err := s.read()
	if err != nil {
		s.log.Warn("tls certificate files changed but do not load; keeping the previous certificate", "err", err)
		return s.cert
	}
	s.cert, s.stamp = cert, stamp
	s.log.Info("tls certificate reloaded", "file", s.certFile, "sha256", Fingerprint(cert.Leaf))
	return s.cert
}

// GetCertificate is tls.Config's GetCertificate.
func (s *Source) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.current(), nil
}

// TLSConfig returns a server configuration (TLS 1.2 and later) presenting
// the Source's certificate.
func (s *Source) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.GetCertificate}
}

// PEM returns the certificate chain in use, PEM-encoded, without the key.
func (s *Source) PEM() []byte {
	var b bytes.Buffer
	for _, der := range s.current().Certificate {
		pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	return b.Bytes()
}

// Leaf returns the certificate in use (the first of its chain).
func (s *Source) Leaf() *x509.Certificate { return s.current().Leaf }

// CertFile returns the path of the certificate file, "" for an Ephemeral
// one.
func (s *Source) CertFile() string { return s.certFile }

// Fingerprint returns the SHA-256 fingerprint of c as openssl prints it
// (`openssl x509 -noout -fingerprint -sha256`): upper-case hex pairs joined
// by colons.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(parts, ":")
}
