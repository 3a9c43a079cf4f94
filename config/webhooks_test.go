package config

import (
	"strings"
	"testing"
)

func TestAccountsWebhooks(t *testing.T) {
	accs, err := ParseAccounts([]byte(`
accounts:
  - slug: a
    name: A
    apiKeys: [ka]
    webhooks: {allowPrivateTargets: true}
  - slug: b
    name: B
    apiKeys: [kb]
`))
	if err != nil {
		t.Fatal(err)
	}
	if !accs[0].Webhooks.AllowPrivateTargets || accs[1].Webhooks.AllowPrivateTargets {
		t.Fatalf("allowPrivateTargets: a %v, b %v; want true, false", accs[0].Webhooks, accs[1].Webhooks)
	}
	for _, bad := range []string{
		"webhooks: {allowPrivate: true}",
		"webhooks: {allowPrivateTargets: maybe}",
		"webhooks: yes",
	} {
		_, err := ParseAccounts([]byte("accounts:\n  - slug: a\n    name: A\n    apiKeys: [ka]\n    " + bad + "\n"))
		if err == nil || !strings.Contains(err.Error(), "line 5") {
			t.Errorf("%s: got %v, want an error naming line 5", bad, err)
		}
	}
}
