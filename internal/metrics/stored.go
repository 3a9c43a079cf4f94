package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mailsink/mailsink/store"
)

// RetentionDeletion records one email deleted by retention from the account
// with slug account, for reason "age" or "count". The account label is
// empty unless PerAccount is set: /metrics needs no key, and must not tell
// one account's activity to anyone.
func (m *Metrics) RetentionDeletion(account, reason string) {
	if m != nil {
		if !m.PerAccount {
			account = ""
		}
		m.RetentionDeleted.WithLabelValues(account, reason).Inc()
	}
}

// StoredEmails registers the gauges mailsink_stored_emails and
// mailsink_stored_bytes of every account that accounts returns at scrape
// time, read from st then (see NewStoredCollector). It does nothing unless
// PerAccount is set.
func (m *Metrics) StoredEmails(st store.Stats, accounts func() []*store.Account, timeout time.Duration) {
	if m != nil && m.PerAccount {
		m.registerer.MustRegister(NewStoredCollector(st, accounts, timeout))
	}
}

// storedCollector reads each account's totals from the store when scraped.
type storedCollector struct {
	st       store.Stats
	accounts func() []*store.Account
	timeout  time.Duration
	emails   *prometheus.Desc
	bytes    *prometheus.Desc
}

// NewStoredCollector returns a collector of the emails and raw bytes each
// account stores, labelled with the account's slug, asked of st at every
// scrape within timeout for all accounts together. When the store fails or
// is too slow the scrape has neither metric, rather than a wrong value or a
// stale one.
func NewStoredCollector(st store.Stats, accounts func() []*store.Account, timeout time.Duration) prometheus.Collector {
	return &storedCollector{
		st:       st,
		accounts: accounts,
		timeout:  timeout,
		emails: prometheus.NewDesc("mailsink_stored_emails",
			"Emails stored, by account slug.", []string{"account"}, nil),
		bytes: prometheus.NewDesc("mailsink_stored_bytes",
			"Sum of the raw sizes of the emails stored, by account slug.", []string{"account"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *storedCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.emails
	ch <- c.bytes
}

// Collect implements prometheus.Collector.
func (c *storedCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	type totals struct{ emails, bytes int64 }
	accounts := c.accounts()
	all := make([]totals, len(accounts))
	for i, a := range accounts {
		n, b, err := c.st.AccountStats(ctx, a.ID)
		if err != nil {
			return
		}
		all[i] = totals{n, b}
	}
	for i, a := range accounts {
		ch <- prometheus.MustNewConstMetric(c.emails, prometheus.GaugeValue, float64(all[i].emails), a.Slug)
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(all[i].bytes), a.Slug)
	}
}
