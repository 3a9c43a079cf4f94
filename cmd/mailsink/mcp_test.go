package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/smtp"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mailsink/mailsink/internal/testenv"
)

// runMain makes the test binary run mailsink's main instead of the tests,
// so that a test can start `mailsink mcp` as a process of its own.
const runMain = "MAILSINK_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMain) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// stdioSession starts `mailsink mcp` as docs/agents.md configures it, for
// the mailsink at baseURL with key, and connects the Go SDK's client to it
// over stdio.
func stdioSession(t *testing.T, baseURL, key string) *mcp.ClientSession {
	t.Helper()
	cfg := testenv.AgentConfig(t, "stdio", baseURL, key)
	if cfg.Command != "mailsink" {
		t.Fatalf("docs/agents.md runs %q, want mailsink", cfg.Command)
	}
	cmd := exec.Command(os.Args[0], cfg.Args...)
	cmd.Env = append(os.Environ(), runMain+"=1", "MAILSINK_API_KEY=")
	for k, v := range cfg.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr testenv.SyncBuffer
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "mailsink-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to mailsink mcp: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			t.Logf("mailsink mcp's stderr:\n%s", stderr.String())
		}
	})
	return cs
}

func callTool(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	if out != nil {
		if res.IsError {
			t.Fatalf("%s(%v): tool error %v", name, args, res.Content)
		}
		data, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatal(err)
		}
	}
	return res
}

// TestMCPOverStdio drives `mailsink mcp` with the Go SDK's command
// transport: the agent's sign-up flow against a running mailsink, its
// other tools, a cancelled wait, and a wrong key.
func TestMCPOverStdio(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			e := testenv.Start(t, b, nil)
			cs := stdioSession(t, e.BaseURL, testenv.AcmeKey)
			ctx := context.Background()
			tools, err := cs.ListTools(ctx, nil)
			if err != nil || len(tools.Tools) != 9 {
				t.Fatalf("tools: %v, %v; want 9", tools, err)
			}

			type codeOut struct {
				EmailID string `json:"emailId"`
				Code    string `json:"code"`
			}
			got := make(chan codeOut, 1)
			go func() {
				var out codeOut
				callTool(t, ctx, cs, "wait_for_code", map[string]any{"recipient": "stdio@acme.test", "timeoutSeconds": 30}, &out)
				got <- out
			}()
			testenv.WaitFor(t, 10*time.Second, "the wait to be held", func() bool { return e.App.HeldRequests() == 1 })
			msg := "From: app@example.com\r\nTo: stdio@acme.test\r\nSubject: Sign-up\r\n\r\nYour code: 731 604\r\n" +
				"Confirm: https://app.example/confirm?t=1\r\n"
			if err := smtp.SendMail(e.SMTP, nil, "app@example.com", []string{"stdio@acme.test"}, []byte(msg)); err != nil {
				t.Fatal(err)
			}
			code := <-got
			if code.Code != "731604" || code.EmailID == "" {
				t.Fatalf("wait_for_code = %+v", code)
			}
			var links struct {
				Links []struct {
					URL string `json:"url"`
				} `json:"links"`
			}
			callTool(t, ctx, cs, "get_links", map[string]any{"id": code.EmailID}, &links)
			if len(links.Links) != 1 || links.Links[0].URL != "https://app.example/confirm?t=1" {
				t.Errorf("get_links = %+v", links)
			}
			var view struct {
				Text *string `json:"text"`
			}
			callTool(t, ctx, cs, "get_email", map[string]any{"id": code.EmailID}, &view)
			if view.Text == nil || !strings.Contains(*view.Text, "Your code: 731 604") {
				t.Errorf("get_email text = %v", view.Text)
			}
			var marked struct {
				Email struct {
					Labels []string `json:"labels"`
				} `json:"email"`
			}
			callTool(t, ctx, cs, "mark_email", map[string]any{"id": code.EmailID, "labels": []string{"used"}}, &marked)
			if len(marked.Email.Labels) != 1 {
				t.Errorf("mark_email = %+v", marked)
			}
			read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "mailsink://emails/" + code.EmailID})
			if err != nil || len(read.Contents) != 2 || !strings.Contains(string(read.Contents[1].Blob), "Subject: Sign-up") {
				t.Errorf("resource: %+v, %v", read, err)
			}
			var deleted struct {
				Deleted int `json:"deleted"`
			}
			callTool(t, ctx, cs, "delete_emails", map[string]any{"label": "used"}, &deleted)
			if deleted.Deleted != 1 {
				t.Errorf("delete_emails = %+v", deleted)
			}
			for args, want := range map[string]string{`{"id": "0190b6d2-7c3e-7a1b-8c2d-1234567890ab"}`: "no email with id", `{"id": "x"}`: "id must be"} {
				var a map[string]any
				json.Unmarshal([]byte(args), &a)
				res := callTool(t, ctx, cs, "get_codes", a, nil)
				if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, want) {
					t.Errorf("get_codes(%s): %+v, want a tool error saying %q", args, res.Content, want)
				}
			}

			// Cancelling a wait ends the held request at the server.
			cctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "wait_for_email", Arguments: map[string]any{"timeoutSeconds": 60}})
				done <- err
			}()
			testenv.WaitFor(t, 10*time.Second, "the wait to be held", func() bool { return e.App.HeldRequests() == 1 })
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled wait: %v", err)
			}
			testenv.WaitFor(t, 5*time.Second, "the held request to end", func() bool { return e.App.HeldRequests() == 0 })

			// A wrong key is a tool error that says so.
			wrong := stdioSession(t, e.BaseURL, "wrong-key")
			res := callTool(t, ctx, wrong, "search_emails", nil, nil)
			if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "refused the API key") {
				t.Errorf("wrong key: %+v", res.Content)
			}
		})
	}
}

// TestMCPCommandNeedsURLAndKey: the command says what is missing.
func TestMCPCommandNeedsURLAndKey(t *testing.T) {
	t.Setenv("MAILSINK_API_KEY", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--url is required"},
		{[]string{"--url", "localhost:8025"}, "must be an http:// or https:// address"},
		{[]string{"--url", "http://localhost:8025"}, "MAILSINK_API_KEY"},
	} {
		var stderr strings.Builder
		if code := mcpStdio(tc.args, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("mailsink mcp %v: exit %d, %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
