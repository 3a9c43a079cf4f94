package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mailsink/mailsink/client"
	"github.com/mailsink/mailsink/internal/mcpserver"
)

// mcpStdio serves mailsink's MCP tools over stdin and stdout, for agents
// that launch local MCP servers: `mailsink mcp --url URL`, the key from
// MAILSINK_API_KEY or --api-key. It talks to the mailsink at URL through
// its API (docs/agents.md).
func mcpStdio(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("mailsink mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", "", "the running mailsink's HTTP address, e.g. http://localhost:8025 (required)")
	key := fs.String("api-key", "", "the API key (default: MAILSINK_API_KEY; a flag shows in the process list)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: mailsink mcp --url URL [--api-key KEY]\n\n"+
			"Serves mailsink's MCP tools over stdio, talking to the mailsink at URL (docs/agents.md).\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *key == "" {
		*key = os.Getenv("MAILSINK_API_KEY")
	}
	u, err := url.Parse(*base)
	switch {
	case *base == "":
		fmt.Fprintln(stderr, "mailsink mcp: --url is required (the running mailsink's HTTP address, e.g. http://localhost:8025)")
		return 2
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		fmt.Fprintf(stderr, "mailsink mcp: --url %q must be an http:// or https:// address\n", *base)
		return 2
	case *key == "":
		fmt.Fprintln(stderr, "mailsink mcp: no API key: set MAILSINK_API_KEY (or pass --api-key)")
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	server := mcpserver.New(mcpserver.NewRemote(client.New(*base, *key)), mcpserver.Options{Version: version, Log: log})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := server.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		fmt.Fprintln(stderr, "mailsink mcp:", err)
		return 1
	}
	return 0
}
