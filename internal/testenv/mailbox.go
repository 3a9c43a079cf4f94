package testenv

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/certs"
	"github.com/mailsink/mailsink/internal/mailparse"
	"github.com/mailsink/mailsink/store"
)

// PutRaw stores raw as one email of the account, received now, with the
// envelope and subject its header gives, as ingest stores mail (the raw
// source unparsed), and returns it.
func PutRaw(t testing.TB, st store.Emails, accountID, raw string) *store.Email {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	e := &store.Email{ID: store.NewID(), AccountID: accountID, Sender: "sender@example.com",
		Recipient: "rcpt@example.com", Status: store.StatusReceived, Labels: []string{},
		RawSize: int64(len(raw)), ReceivedAt: now, CreatedAt: now, UpdatedAt: now}
	if sum, err := mailparse.ParseSummary([]byte(raw)); err == nil {
		e.Subject, e.MessageID = sum.Subject, sum.MessageID
	}
	if err := st.CreateEmails(context.Background(), &store.Body{Raw: []byte(raw)}, []*store.Email{e}); err != nil {
		t.Fatalf("store an email: %v", err)
	}
	return e
}

// TLSConfig returns a server TLS configuration with a self-signed
// certificate for localhost and 127.0.0.1.
func TLSConfig(t testing.TB) *tls.Config {
	t.Helper()
	certPEM, keyPEM, err := certs.SelfSigned([]string{"localhost", "127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}}
}
