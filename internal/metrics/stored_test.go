package metrics_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mailsink/mailsink/internal/metrics"
	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/pebblestore"
)

func TestStoredEmails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := pebblestore.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.UnixMilli(1_767_225_600_000).UTC()
	for i, size := range []int64{10, 20} {
		e := &store.Email{
			ID: store.NewID(), AccountID: "id-acme", Sender: "s@example.com", Recipient: "r@example.com",
			Status: store.StatusReceived, Labels: []string{}, RawSize: size,
			ReceivedAt: now.Add(time.Duration(i) * time.Second), CreatedAt: now, UpdatedAt: now,
		}
		if err := st.CreateEmails(ctx, &store.Body{}, []*store.Email{e}); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	m := metrics.New(reg, "test")
	accounts := []*store.Account{{ID: "id-acme", Slug: "acme"}, {ID: "id-globex", Slug: "globex"}}
	m.StoredEmails(st, func() []*store.Account { return accounts }, time.Second)
	if n, err := testutil.GatherAndCount(reg, "mailsink_stored_emails", "mailsink_stored_bytes"); err != nil || n != 0 {
		t.Fatalf("without PerAccount: %d series, %v; want 0 (no account is named)", n, err)
	}
	m.PerAccount = true
	m.StoredEmails(st, func() []*store.Account { return accounts }, time.Second)

	want := `
# HELP mailsink_stored_bytes Sum of the raw sizes of the emails stored, by account slug.
# TYPE mailsink_stored_bytes gauge
mailsink_stored_bytes{account="acme"} 30
mailsink_stored_bytes{account="globex"} 0
# HELP mailsink_stored_emails Emails stored, by account slug.
# TYPE mailsink_stored_emails gauge
mailsink_stored_emails{account="acme"} 2
mailsink_stored_emails{account="globex"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mailsink_stored_emails", "mailsink_stored_bytes"); err != nil {
		t.Error(err)
	}

	// A store that fails yields neither metric for that scrape.
	st.Close()
	if n, err := testutil.GatherAndCount(reg, "mailsink_stored_emails", "mailsink_stored_bytes"); err != nil || n != 0 {
		t.Errorf("with the store closed: %d series, %v; want 0", n, err)
	}
}

func TestRetentionDeleted(t *testing.T) {
	t.Parallel()
	m := metrics.New(prometheus.NewRegistry(), "test")
	m.RetentionDeletion("acme", "age")
	if got := testutil.ToFloat64(m.RetentionDeleted.WithLabelValues("", "age")); got != 1 {
		t.Errorf("without PerAccount: got %v under no account, want 1", got)
	}
	m.PerAccount = true
	m.RetentionDeletion("acme", "age")
	m.RetentionDeletion("acme", "age")
	m.RetentionDeletion("acme", "count")
	if got := testutil.ToFloat64(m.RetentionDeleted.WithLabelValues("acme", "age")); got != 2 {
		t.Errorf("acme, age: got %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.RetentionDeleted.WithLabelValues("acme", "count")); got != 1 {
		t.Errorf("acme, count: got %v, want 1", got)
	}
	var nilMetrics *metrics.Metrics
	nilMetrics.RetentionDeletion("acme", "age") // records nothing, does not panic
}
