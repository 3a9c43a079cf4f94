package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/internal/testenv"
)

// One inbound message whose To header holds a 40 KiB address, more than the
// embedded store can index, is refused (413) and the store takes the next
// message: a create its log answered could never be applied and would hold
// up every create after it.
func TestLongAddressRefusedEmbedded(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenBolt}, nil)
	post := func(raw string) *testenv.Response {
		req, _ := http.NewRequest(http.MethodPost, e.BaseURL+"/v1/inbound", strings.NewReader(raw))
		req.Header.Set("Content-Type", "message/rfc822")
		req.Header.Set("X-Api-Key", acme)
		return e.Send(t, req)
	}
	long := strings.Repeat("a", 40<<10) + "@acme.test"
	if resp := post("From: a@example.com\r\nTo: " + long + "\r\nSubject: long\r\n\r\nhi\r\n"); resp.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("inbound with a 40 KiB To address: %d %s, want 413", resp.Status, resp.Body)
	}
	if resp := post("From: a@example.com\r\nTo: ok@acme.test\r\nSubject: next\r\n\r\nhi\r\n"); resp.Status != http.StatusCreated {
		t.Fatalf("the next inbound message: %d %s; want 201", resp.Status, resp.Body)
	}
	if r := e.Do(t, http.MethodGet, "/v1/emails", acme, nil); r.Status != http.StatusOK {
		t.Fatalf("GET /v1/emails after it: %d %s", r.Status, r.Body)
	}
}
