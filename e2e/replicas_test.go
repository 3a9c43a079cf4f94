package e2e

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/mailsink/mailsink/client"
	"github.com/mailsink/mailsink/internal/testenv"
)

// TestReplicasShareRedis runs two mailsink processes on one Redis with the
// same accounts file, as two replicas behind a load balancer would run: what
// one accepts or changes, the other shows at once, with no retry beyond
// reading after the acknowledgement.
func TestReplicasShareRedis(t *testing.T) {
	t.Parallel()
	redisURL := testenv.RedisURL(t)
	if redisURL == "" {
		t.Skip("Redis is not available")
	}
	prefix := redisPrefix(t, redisURL)
	accounts := filepath.Join(t.TempDir(), "accounts.yaml")
	if err := os.WriteFile(accounts, []byte(testenv.AccountsYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"MAILSINK_REDIS_URL=" + redisURL, "MAILSINK_REDIS_PREFIX=" + prefix, "MAILSINK_ACCOUNTS_FILE=" + accounts}
	a := startProcess(t, env...)
	b := startProcess(t, env...)
	eb := b.env()
	const rcpt = "replica-user@" + testenv.AcmeDomain

	raw := "From: App <app@example.com>\r\nTo: " + rcpt + "\r\nSubject: Sent to replica A\r\n\r\nhello from A\r\n"
	if err := sendOne(a.SMTP, "app@example.com", rcpt, raw); err != nil {
		t.Fatalf("send to A: %v", err)
	}
	// The Go client, one per replica.
	ca, cb := client.New(a.HTTP, testenv.AcmeKey), client.New(b.HTTP, testenv.AcmeKey)
	ctx := context.Background()
	items, err := cb.List(ctx, client.ListOptions{Filter: client.Filter{Recipient: rcpt}})
	if err != nil {
		t.Fatalf("list on B: %v", err)
	}
	if len(items) != 1 {
		t.Fatalf("B lists %d emails right after A acknowledged one, want 1: %+v", len(items), items)
	}
	id := items[0].ID
	if s := items[0].Subject; s == nil || *s != "Sent to replica A" || items[0].Account.Slug != "acme" {
		t.Errorf("B lists %+v", items[0])
	}
	if other, err := client.New(b.HTTP, testenv.GlobexKey).List(ctx, client.ListOptions{}); err != nil || len(other) != 0 {
		t.Errorf("another account sees %d emails on B (%v), want 0", len(other), err)
	}

	notes := "patched on B"
	if _, err := cb.Update(ctx, id, client.Update{Status: "processed", Labels: []string{"seen-on-b"}, Notes: &notes}); err != nil {
		t.Fatalf("patch on B: %v", err)
	}
	got, err := ca.Get(ctx, id)
	if err != nil {
		t.Fatalf("get on A: %v", err)
	}
	if got.Status != "processed" || got.Notes == nil || *got.Notes != notes || len(got.Labels) != 1 || got.Labels[0] != "seen-on-b" {
		t.Errorf("A shows %+v after the patch on B", got.Email)
	}
	if got.Body == nil || got.Body.Raw != raw {
		t.Errorf("A shows body %+v, want the raw message sent", got.Body)
	}

	if err := ca.Delete(ctx, id); err != nil {
		t.Fatalf("delete on A: %v", err)
	}
	wantErrorEnvelope(t, "get on B after delete on A", eb.Do(t, http.MethodGet, "/v1/emails/"+id, testenv.AcmeKey, nil), http.StatusNotFound)
	wantErrorEnvelope(t, "patch on B after delete on A",
		eb.Do(t, http.MethodPatch, "/v1/emails/"+id, testenv.AcmeKey, map[string]any{"status": "archived"}), http.StatusNotFound)
	if n := len(eb.Do(t, http.MethodGet, "/v1/emails?recipient="+url.QueryEscape(rcpt), testenv.AcmeKey, nil).JSON(t)["items"].([]any)); n != 0 {
		t.Errorf("B lists %d emails after the delete on A, want 0", n)
	}
}
