// Package inboundtest builds provider webhook requests for tests: forms
// from the fixtures in inbound/testdata, Mailgun signatures, and SNS
// messages signed with a certificate made for the test and served by a
// local HTTPS server posing as SNS.
package inboundtest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/inbound"
)

// Form is a fixture of a form webhook: text fields and files.
type Form struct {
	Fields map[string]string `json:"fields"`
	Files  []struct {
		Field    string `json:"field"`
		Filename string `json:"filename"`
		Type     string `json:"type"`
		Content  string `json:"content"`
	} `json:"files"`
}

// Fixture returns the content of inbound/testdata/name.
func Fixture(t testing.TB, name string) []byte {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// LoadForm reads a form fixture.
func LoadForm(t testing.TB, name string) *Form {
	t.Helper()
	var f Form
	if err := json.Unmarshal(Fixture(t, name), &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &f
}

// Multipart encodes the form as multipart/form-data, fields in name order
// then files; it returns the body and its Content-Type.
func (f *Form) Multipart(t testing.TB) ([]byte, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	names := make([]string, 0, len(f.Fields))
	for k := range f.Fields {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		mw.WriteField(k, f.Fields[k])
	}
	for _, fl := range f.Files {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="`+fl.Field+`"; filename="`+fl.Filename+`"`)
		h.Set("Content-Type", fl.Type)
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(fl.Content))
	}
	mw.Close()
	return b.Bytes(), mw.FormDataContentType()
}

// SignMailgun sets timestamp (at), token and signature as Mailgun does with
// key.
func (f *Form) SignMailgun(key, token string, at time.Time) {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(ts + token))
	f.Fields["timestamp"] = ts
	f.Fields["token"] = token
	f.Fields["signature"] = hex.EncodeToString(mac.Sum(nil))
}

// SNSHost is the host the test SNS server answers for.
const SNSHost = "sns.us-east-1.amazonaws.com"

// SNS is a local HTTPS server posing as SNS: it serves its signing
// certificate and counts subscription confirmations.
type SNS struct {
	Key     *rsa.PrivateKey
	Cert    *x509.Certificate
	CertPEM []byte
	Server  *httptest.Server
	// Confirmed counts the subscription confirmations (SubscribeURL
	// fetches).
	Confirmed atomic.Int64
	// Redirected counts the requests answered with a redirect: every path
	// under /redirect/ is redirected (302) to the same path without it.
	Redirected atomic.Int64
	mu         sync.Mutex
	tokens     map[string]int // confirmations by Token
}

// ConfirmedToken reports how many times the SubscribeURL with token was
// fetched.
func (s *SNS) ConfirmedToken(token string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens[token]
}

// CertURL is the SigningCertURL of the messages Sign signs.
const CertURL = "https://" + SNSHost + "/SimpleNotificationService-test.pem"

// NewSNS starts the server; it stops at the end of the test.
func NewSNS(t testing.TB) *SNS {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: SNSHost},
		DNSNames:     []string{SNSHost},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	s := &SNS{Key: key, Cert: cert, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	mux := http.NewServeMux()
	mux.HandleFunc("/SimpleNotificationService-test.pem", func(w http.ResponseWriter, _ *http.Request) { w.Write(s.CertPEM) })
	s.tokens = map[string]int{}
	mux.HandleFunc("/confirm", func(w http.ResponseWriter, r *http.Request) {
		s.Confirmed.Add(1)
		s.mu.Lock()
		s.tokens[r.URL.Query().Get("Token")]++
		s.mu.Unlock()
		w.Write([]byte("<ConfirmSubscriptionResponse/>"))
	})
	mux.HandleFunc("/redirect/", func(w http.ResponseWriter, r *http.Request) {
		s.Redirected.Add(1)
		to := *r.URL
		to.Path = strings.TrimPrefix(r.URL.Path, "/redirect")
		http.Redirect(w, r, to.RequestURI(), http.StatusFound)
	})
	s.Server = httptest.NewUnstartedServer(mux)
	s.Server.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	s.Server.StartTLS()
	t.Cleanup(s.Server.Close)
	return s
}

// Client returns an HTTP client that reaches this server for every host
// name (SNS's included) and trusts its certificate.
func (s *SNS) Client() *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(s.Cert)
	addr := s.Server.Listener.Addr().String()
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}}
}

// Message is an SNS message as posted to an HTTP endpoint.
type Message struct {
	Type             string
	MessageId        string
	Token            string `json:",omitempty"`
	TopicArn         string
	Subject          *string `json:",omitempty"`
	Message          string
	SubscribeURL     string `json:",omitempty"`
	Timestamp        string
	SignatureVersion string
	Signature        string
	SigningCertURL   string
	UnsubscribeURL   string `json:",omitempty"`
}

// Notification returns an SNS Notification carrying message on topic.
func Notification(topic, id, message string) *Message {
	return &Message{Type: "Notification", MessageId: id, TopicArn: topic, Message: message,
		Timestamp: time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), SignatureVersion: "1", SigningCertURL: CertURL}
}

// Confirmation returns an SNS SubscriptionConfirmation for topic, with
// token in its SubscribeURL.
func Confirmation(topic, token string) *Message {
	return &Message{Type: "SubscriptionConfirmation", MessageId: "165545c9-2a5c-472c-8df2-7ff2be2b3b1b",
		Token: token, TopicArn: topic,
		Message:      "You have chosen to subscribe to the topic " + topic + ".\nTo confirm the subscription, visit the SubscribeURL included in this message.",
		SubscribeURL: "https://" + SNSHost + "/confirm?Action=ConfirmSubscription&TopicArn=" + topic + "&Token=" + token,
		Timestamp:    time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), SignatureVersion: "1", SigningCertURL: CertURL}
}

// Sign signs m with the server's key (m.SignatureVersion: "1" SHA1withRSA,
// "2" SHA256withRSA) and returns its JSON.
func (s *SNS) Sign(t testing.TB, m *Message) []byte {
	t.Helper()
	var b bytes.Buffer
	add := func(k, v string) { b.WriteString(k + "\n" + v + "\n") }
	add("Message", m.Message)
	add("MessageId", m.MessageId)
	if m.Type == "Notification" {
		if m.Subject != nil {
			add("Subject", *m.Subject)
		}
	} else {
		add("SubscribeURL", m.SubscribeURL)
	}
	add("Timestamp", m.Timestamp)
	if m.Type != "Notification" {
		add("Token", m.Token)
	}
	add("TopicArn", m.TopicArn)
	add("Type", m.Type)
	var sig []byte
	var err error
	if m.SignatureVersion == "2" {
		h := sha256.Sum256(b.Bytes())
		sig, err = rsa.SignPKCS1v15(rand.Reader, s.Key, crypto.SHA256, h[:])
	} else {
		h := sha1.Sum(b.Bytes())
		sig, err = rsa.SignPKCS1v15(rand.Reader, s.Key, crypto.SHA1, h[:])
	}
	if err != nil {
		t.Fatal(err)
	}
	m.Signature = base64.StdEncoding.EncodeToString(sig)
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// SignSendGrid signs body now as SendGrid's signed webhooks do: ECDSA
// over SHA-256 of the timestamp followed by the body.
func SignSendGrid(t testing.TB, key *ecdsa.PrivateKey, body []byte) inbound.SendGridSignature {
	t.Helper()
	return SignSendGridAt(t, key, body, strconv.FormatInt(time.Now().Unix(), 10))
}

// SignSendGridAt signs body as SendGrid does, with ts as the timestamp
// header's value (Unix seconds, or anything a test needs).
func SignSendGridAt(t testing.TB, key *ecdsa.PrivateKey, body []byte, ts string) inbound.SendGridSignature {
	t.Helper()
	h := sha256.Sum256(append([]byte(ts), body...))
	sig, err := ecdsa.SignASN1(rand.Reader, key, h[:])
	if err != nil {
		t.Fatal(err)
	}
	return inbound.SendGridSignature{Signature: base64.StdEncoding.EncodeToString(sig), Timestamp: ts}
}

// PublicKeyBase64 is key as SendGrid shows a verification key: base64 of
// its DER.
func PublicKeyBase64(t testing.TB, key *ecdsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(der)
}
