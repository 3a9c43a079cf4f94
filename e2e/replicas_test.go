package e2e

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"

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
	ea, eb := a.env(), b.env()
	const rcpt = "replica-user@" + testenv.AcmeDomain

	raw := "From: App <app@example.com>\r\nTo: " + rcpt + "\r\nSubject: Sent to replica A\r\n\r\nhello from A\r\n"
	if err := sendOne(a.SMTP, "app@example.com", rcpt, raw); err != nil {
		t.Fatalf("send to A: %v", err)
	}
	resp := eb.Do(t, http.MethodGet, "/v1/emails?recipient="+url.QueryEscape(rcpt), testenv.AcmeKey, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("list on B: %d %s", resp.Status, resp.Body)
	}
	items := resp.JSON(t)["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("B lists %d emails right after A acknowledged one, want 1: %s", len(items), resp.Body)
	}
	item := items[0].(map[string]any)
	id := item["id"].(string)
	if item["subject"] != "Sent to replica A" || item["account"].(map[string]any)["slug"] != "acme" {
		t.Errorf("B lists %v", item)
	}
	if n := len(eb.Do(t, http.MethodGet, "/v1/emails", testenv.GlobexKey, nil).JSON(t)["items"].([]any)); n != 0 {
		t.Errorf("another account sees %d emails on B, want 0", n)
	}

	resp = eb.Do(t, http.MethodPatch, "/v1/emails/"+id, testenv.AcmeKey,
		map[string]any{"status": "processed", "labels": []string{"seen-on-b"}, "notes": "patched on B"})
	if resp.Status != http.StatusOK {
		t.Fatalf("patch on B: %d %s", resp.Status, resp.Body)
	}
	resp = ea.Do(t, http.MethodGet, "/v1/emails/"+id, testenv.AcmeKey, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("get on A: %d %s", resp.Status, resp.Body)
	}
	got := resp.JSON(t)["item"].(map[string]any)
	labels, _ := got["labels"].([]any)
	if got["status"] != "processed" || got["notes"] != "patched on B" || len(labels) != 1 || labels[0] != "seen-on-b" {
		t.Errorf("A shows %v after the patch on B", got)
	}
	if body, _ := got["body"].(map[string]any); body == nil || body["raw"] != raw {
		t.Errorf("A shows body %v, want the raw message sent", got["body"])
	}

	if resp := ea.Do(t, http.MethodDelete, "/v1/emails/"+id, testenv.AcmeKey, nil); resp.Status != http.StatusNoContent {
		t.Fatalf("delete on A: %d %s", resp.Status, resp.Body)
	}
	wantErrorEnvelope(t, "get on B after delete on A", eb.Do(t, http.MethodGet, "/v1/emails/"+id, testenv.AcmeKey, nil), http.StatusNotFound)
	wantErrorEnvelope(t, "patch on B after delete on A",
		eb.Do(t, http.MethodPatch, "/v1/emails/"+id, testenv.AcmeKey, map[string]any{"status": "archived"}), http.StatusNotFound)
	if n := len(eb.Do(t, http.MethodGet, "/v1/emails?recipient="+url.QueryEscape(rcpt), testenv.AcmeKey, nil).JSON(t)["items"].([]any)); n != 0 {
		t.Errorf("B lists %d emails after the delete on A, want 0", n)
	}
}
