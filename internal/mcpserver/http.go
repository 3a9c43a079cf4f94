package mcpserver

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mailsink/mailsink/store"
)

// HTTPConfig configures the MCP endpoint.
type HTTPConfig struct {
	// MaxSessionsPerAccount bounds the MCP sessions one account has open;
	// a new session past it answers 429.
	MaxSessionsPerAccount int
	// SessionIdleTimeout closes a session that received no request for
	// this long.
	SessionIdleTimeout time.Duration
	// WriteTimeout is the HTTP server's: a request to the endpoint may
	// hold a wait of MaxWaitSeconds, so it gets that long more to write
	// its answer.
	WriteTimeout time.Duration
	// Version is mailsink's version, told to clients.
	Version string
	// Log logs internal errors.
	Log *slog.Logger
}

// HTTP serves MCP over Streamable HTTP: one MCP server per account, each
// with its own sessions, so that nothing (sessions, notifications, a
// session id sent with another account's key) crosses accounts. Sessions
// are stateful (the SDK's default): a client's cancellation of a held wait
// reaches it through its session. Several replicas behind a balancer need
// sticky routing by the Mcp-Session-Id header (docs/agents.md).
type HTTP struct {
	cfg        HTTPConfig
	newMailbox func(*store.Account) Mailbox
	schemas    *mcp.SchemaCache

	mu       sync.Mutex
	accounts map[string]*accountServer
}

// accountServer is one account's MCP server and its sessions.
type accountServer struct {
	server  *mcp.Server
	handler http.Handler
	// opening counts the requests opening a session now, so that the cap
	// holds while they are served.
	mu      sync.Mutex
	opening int
}

// NewHTTP returns the MCP endpoint; newMailbox gives an account's Mailbox.
func NewHTTP(cfg HTTPConfig, newMailbox func(*store.Account) Mailbox) *HTTP {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &HTTP{cfg: cfg, newMailbox: newMailbox, schemas: mcp.NewSchemaCache(), accounts: map[string]*accountServer{}}
}

// server returns the account's MCP server, made on first use.
func (h *HTTP) server(acc *store.Account) *accountServer {
	h.mu.Lock()
	defer h.mu.Unlock()
	if as := h.accounts[acc.ID]; as != nil {
		return as
	}
	s := New(h.newMailbox(acc), Options{Version: h.cfg.Version, Log: h.cfg.Log, SchemaCache: h.schemas})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{
		SessionTimeout: h.cfg.SessionIdleTimeout,
		Logger:         h.cfg.Log,
	})
	// Browsers may not post to the endpoint from another origin (the
	// SDK's own check refuses a loopback listener reached by another host
	// name: DNS rebinding).
	as := &accountServer{server: s, handler: http.NewCrossOriginProtection().Handler(handler)}
	h.accounts[acc.ID] = as
	return as
}

// Sessions returns how many MCP sessions the account has open: those that
// were initialized (a request that opened none, like a probe for a newer
// protocol, leaves a session that is closing).
func (h *HTTP) Sessions(acc *store.Account) int {
	n := 0
	for ss := range h.server(acc).server.Sessions() {
		if ss.InitializeParams() != nil {
			n++
		}
	}
	return n
}

// sessionless is the first protocol version without sessions.
const sessionless = "2026-07-28"

// ServeAccount serves one request of the endpoint for acc, whose API key
// the caller checked.
func (h *HTTP) ServeAccount(w http.ResponseWriter, r *http.Request, acc *store.Account) {
	as := h.server(acc)
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		as.handler.ServeHTTP(w, r)
		return
	default:
		// mailsink sends nothing outside the answer to a request: no
		// stream of server messages to hold open (the specification lets a
		// server answer 405).
		w.Header().Set("Allow", "POST, DELETE")
		http.Error(w, "method not allowed: POST MCP messages; mailsink opens no stream of its own", http.StatusMethodNotAllowed)
		return
	}
	// A tool call may hold a wait: the answer gets the wait's length on
	// top of the server's write timeout.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(h.cfg.WriteTimeout + MaxWaitSeconds*time.Second))
	// A request of a session, or of the sessionless protocol (2026-07-28
	// on: a client's probe with server/discover, which this stateful
	// server answers without opening a session), opens none.
	if r.Header.Get("Mcp-Session-Id") != "" || r.Header.Get("Mcp-Protocol-Version") >= sessionless {
		as.handler.ServeHTTP(w, r)
		return
	}
	as.mu.Lock()
	n := h.Sessions(acc) + as.opening
	if n < h.cfg.MaxSessionsPerAccount {
		as.opening++
	}
	as.mu.Unlock()
	if n >= h.cfg.MaxSessionsPerAccount {
		w.Header().Set("Retry-After", "60")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"this account has %d MCP sessions open, the most it may: end one (HTTP DELETE with its Mcp-Session-Id) or wait until one has been idle for %s"}}`,
			n, h.cfg.SessionIdleTimeout)
		return
	}
	defer func() {
		as.mu.Lock()
		as.opening--
		as.mu.Unlock()
	}()
	as.handler.ServeHTTP(w, r)
}
