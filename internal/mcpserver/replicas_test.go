package mcpserver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mailsink/mailsink/internal/testenv"
)

// stickyProxy is a balancer with sticky sessions on Mcp-Session-Id, as
// docs/agents.md configures HAProxy: a request without a session goes to
// the replica with the fewest sessions; the replica that answers with a
// session id gets every later request carrying it.
type stickyProxy struct {
	replicas []*url.URL
	mu       sync.Mutex
	sessions map[string]int // session id -> replica
}

func (p *stickyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	i, ok := p.sessions[r.Header.Get("Mcp-Session-Id")]
	if !ok {
		count := make([]int, len(p.replicas))
		for _, j := range p.sessions {
			count[j]++
		}
		for j := range count {
			if count[j] < count[i] {
				i = j
			}
		}
	}
	p.mu.Unlock()
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(p.replicas[i]) },
		ModifyResponse: func(resp *http.Response) error {
			if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
				p.mu.Lock()
				p.sessions[id] = i
				p.mu.Unlock()
			}
			return nil
		},
	}
	rp.ServeHTTP(w, r)
}

func (p *stickyProxy) replicaOf(id string) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i, ok := p.sessions[id]
	return i, ok
}

// TestReplicasWithStickySessions: two replicas on one Redis behind a
// balancer with sticky sessions. Each session's calls reach its replica,
// and a wait held by one replica answers when the email arrives over SMTP
// at the other. Without stickiness, a replica does not know another's
// session: 404.
func TestReplicasWithStickySessions(t *testing.T) {
	t.Parallel()
	shared := testenv.SharedRedis(t)
	envs := []*testenv.Env{testenv.Start(t, shared, nil), testenv.Start(t, shared, nil)}
	proxy := &stickyProxy{sessions: map[string]int{}}
	for _, e := range envs {
		u, _ := url.Parse(e.BaseURL)
		proxy.replicas = append(proxy.replicas, u)
	}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)

	// Sessions until each replica holds one.
	onReplica := map[int]*mcp.ClientSession{}
	for tries := 0; len(onReplica) < 2 && tries < 2; tries++ {
		cs := connect(t, front.URL, acme)
		i, ok := proxy.replicaOf(cs.ID())
		if !ok {
			t.Fatalf("the balancer did not see session %s", cs.ID())
		}
		onReplica[i] = cs
	}
	if len(onReplica) != 2 {
		t.Fatalf("sessions on %d replicas, want 2", len(onReplica))
	}
	for i, cs := range onReplica {
		other := envs[1-i]
		rcpt := "replica" + string(rune('a'+i)) + "@acme.test"
		type codeOut struct {
			Code string `json:"code"`
		}
		got := make(chan codeOut, 1)
		go func() {
			got <- ok[codeOut](t, cs, "wait_for_code", map[string]any{"recipient": rcpt, "timeoutSeconds": 30})
		}()
		testenv.WaitFor(t, 5*time.Second, "the wait to be held on its replica", func() bool { return envs[i].App.HeldRequests() == 1 })
		sendSMTP(t, other.SMTP, rcpt, "From: app@example.com\r\nTo: "+rcpt+"\r\nSubject: Code\r\n\r\nYour code is 246810.\r\n")
		if out := <-got; out.Code != "246810" {
			t.Errorf("session on replica %d: wait_for_code = %+v", i, out)
		}
	}

	// The same session's request sent past the balancer to the other
	// replica is unknown there.
	cs := onReplica[0]
	req, _ := http.NewRequest(http.MethodPost, envs[1].BaseURL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+acme)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	if r := envs[1].Send(t, req); r.Status != http.StatusNotFound {
		t.Errorf("a session of replica 0 at replica 1: %d, want 404", r.Status)
	}
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Errorf("through the balancer, the session still works: %v", err)
	}
}
