package httpapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/accounts"
	"github.com/mailsink/mailsink/internal/ingest"
	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/pebblestore"
)

// benchPage returns a page of 25 emails shaped like the load tool's: a
// subject, no notes, a label on every other one.
func benchPage(accountID string) []*store.Email {
	base := time.UnixMilli(1_700_000_000_123).UTC()
	out := make([]*store.Email, 25)
	for i := range out {
		subj := fmt.Sprintf("Load test message %d", i)
		mid := fmt.Sprintf("<%d.bench@example.com>", i)
		labels := []string{}
		if i%2 == 0 {
			labels = []string{"bench", "ünïcode"}
		}
		t := base.Add(time.Duration(i) * time.Second)
		out[i] = &store.Email{
			ID: store.NewID(), AccountID: accountID, MessageID: &mid,
			Sender: "sender@example.com", Recipient: "rcpt7@acme.test",
			Subject: &subj, Status: store.StatusReceived, Labels: labels,
			RawSize: 2048, ReceivedAt: t, CreatedAt: t, UpdatedAt: t,
		}
	}
	return out
}

// BenchmarkListByRecipient serves GET /v1/emails?recipient=X&limit=25 from
// an embedded store holding one page of that recipient's emails, through the
// whole handler (auth, routing, store, JSON), without a socket: the
// per-request CPU and allocations of mailsink's own part of a list.
func BenchmarkListByRecipient(b *testing.B) {
	const key = "bench-key"
	accs := []config.Account{{ID: "acc-bench", Slug: "bench", Name: "Bench", Domains: []string{"acme.test"}}}
	accs[0].KeyDigests = [][32]byte{config.Digest(key)}
	reg := accounts.New(accs)
	st, err := pebblestore.Open(filepath.Join(b.TempDir(), "store"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for _, e := range benchPage("acc-bench") {
		if err := st.CreateEmails(context.Background(), &store.Body{Raw: []byte("x")}, []*store.Email{e}); err != nil {
			b.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	api := New(Config{StoreTimeout: time.Minute, MaxHeldPerAccount: 1}, st, reg, ingest.New(st, time.Now, ingest.Config{}), log, time.Now)
	req := httptest.NewRequest(http.MethodGet, "/v1/emails?recipient=rcpt7%40acme.test&limit=25", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		api.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}

// BenchmarkEncodeList encodes the list answer of one page of 25 emails.
func BenchmarkEncodeList(b *testing.B) {
	accs := []config.Account{{ID: "acc-bench", Slug: "bench", Name: "Bench"}}
	api := &API{accounts: accounts.New(accs)}
	page := benchPage("acc-bench")
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		api.writeList(w, http.StatusOK, page)
	}
}
