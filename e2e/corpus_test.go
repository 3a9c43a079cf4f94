package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/emersion/go-smtp"
)

// corpusFiles returns every message of the shared corpus copied into the
// repository.
func corpusFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	filepath.WalkDir("../internal/mailparse/testdata/corpus", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".eml") {
			files = append(files, path)
		}
		return nil
	})
	if len(files) < 68 {
		t.Fatalf("found %d corpus messages, want 68", len(files))
	}
	return files
}

// TestCorpus sends every corpus message over SMTP and POST /v1/inbound: each
// is accepted, inbound keeps its raw byte-exact, and its detail can be read.
func TestCorpus(t *testing.T) {
	t.Parallel()
	p := startProcess(t, "MAILSINK_DATA_DIR="+t.TempDir(), "MAILSINK_API_KEY=corpus-key")
	e := p.env()
	for _, path := range corpusFiles(t) {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel("../internal/mailparse/testdata/corpus", path)

		c, err := smtp.Dial(p.SMTP)
		if err != nil {
			t.Fatal(err)
		}
		err = c.SendMail("corpus@example.com", []string{"smtp@corpus.test"}, strings.NewReader(string(raw)))
		c.Close()
		if err != nil {
			t.Errorf("%s over SMTP: %v", name, err)
		}

		req, _ := http.NewRequest(http.MethodPost, p.HTTP+"/v1/inbound", strings.NewReader(string(raw)))
		req.Header.Set("Content-Type", "message/rfc822")
		req.Header.Set("Authorization", "Bearer corpus-key")
		req.Header.Set("X-Envelope-From", "corpus@example.com")
		req.Header.Set("X-Envelope-To", "inbound@corpus.test")
		resp := e.Send(t, req)
		if resp.Status != http.StatusCreated {
			t.Errorf("%s over /v1/inbound: %d %s", name, resp.Status, resp.Body)
			continue
		}
		item := resp.JSON(t)["items"].([]any)[0].(map[string]any)
		if int(item["rawSize"].(float64)) != len(raw) {
			t.Errorf("%s: rawSize %v, want %d", name, item["rawSize"], len(raw))
		}
		id := item["id"].(string)
		got := e.Do(t, http.MethodGet, "/v1/emails/"+id, "corpus-key", nil)
		if got.Status != http.StatusOK {
			t.Errorf("%s: get detail: %d %s", name, got.Status, got.Body)
			continue
		}
		body := got.JSON(t)["item"].(map[string]any)["body"].(map[string]any)
		// JSON strings cannot carry bytes that are not UTF-8; such raws are
		// compared byte for byte through the raw download instead.
		if r := body["raw"].(string); utf8.Valid(raw) && r != string(raw) {
			t.Errorf("%s: raw in the detail differs from what was sent (%d vs %d bytes)", name, len(r), len(raw))
		}
	}
}
