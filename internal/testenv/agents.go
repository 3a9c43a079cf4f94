package testenv

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// AgentServer is one configuration of docs/agents.md, as an MCP client
// reads it: over HTTP (URL and Headers) or over stdio (Command, Args,
// Env).
type AgentServer struct {
	Type    string            `json:"type"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

// The placeholders of docs/agents.md's configurations.
const (
	agentsBaseURL = "http://localhost:8025"
	agentsKey     = "YOUR_API_KEY"
)

// AgentConfig returns the configuration of docs/agents.md for transport
// ("http" or "stdio") with baseURL and key in place of its placeholders,
// so that the tests connect as the page tells users to.
func AgentConfig(t testing.TB, transport, baseURL, key string) AgentServer {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	page, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "docs", "agents.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(page), "```json\n")
	for _, b := range blocks[1:] {
		b, _, _ = strings.Cut(b, "```")
		if !strings.Contains(b, `"mcpServers"`) {
			continue
		}
		b = strings.ReplaceAll(strings.ReplaceAll(b, agentsBaseURL, baseURL), agentsKey, key)
		var cfg struct {
			MCPServers map[string]AgentServer `json:"mcpServers"`
		}
		if err := json.Unmarshal([]byte(b), &cfg); err != nil {
			t.Fatalf("docs/agents.md: a configuration is not JSON: %v\n%s", err, b)
		}
		s, ok := cfg.MCPServers["mailsink"]
		if !ok {
			t.Fatalf("docs/agents.md: a configuration has no mailsink server:\n%s", b)
		}
		if (transport == "http") == (s.Type == "http") && (transport == "stdio") == (s.Command != "") {
			return s
		}
	}
	t.Fatalf("docs/agents.md has no %s configuration", transport)
	return AgentServer{}
}
