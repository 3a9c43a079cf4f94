package loadgen

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Peers the load tool can run the same scenarios against: another test-mail
// sink, built by hand, started on free loopback ports with its in-memory
// store. docs/benchmarks.md says how to build it.
const (
	// PeerInbucket is Inbucket (github.com/inbucket/inbucket).
	PeerInbucket = "inbucket"
	// EnvInbucket names the variable the suite reads the path of an
	// Inbucket binary from.
	EnvInbucket = "MAILSINK_BENCH_INBUCKET"
)

// Client API flavours: which list endpoint a Client calls.
const (
	// APIMailsink is mailsink's GET /v1/emails?recipient=X&limit=N&offset=M.
	APIMailsink = ""
	// APIInbucket is Inbucket's GET /api/v1/mailbox/{address}: the whole
	// mailbox, oldest first, with no paging.
	APIInbucket = PeerInbucket
)

// PeerOptions say how to start a peer.
type PeerOptions struct {
	Name   string // PeerInbucket
	Binary string
	// Log receives the peer's log; nil discards it.
	Log io.Writer
}

// StartPeer runs the peer's binary on free loopback ports with its memory
// store and every limit that would drop or expire mail during a run turned
// off, and waits until both its SMTP and HTTP listeners answer. Stop ends
// it. A port taken by another process between the pick and the peer's
// listen makes the peer exit; StartPeer then tries again with new ports.
func StartPeer(ctx context.Context, o PeerOptions) (*Server, error) {
	if o.Name != PeerInbucket {
		return nil, fmt.Errorf("unknown peer %q (want %s)", o.Name, PeerInbucket)
	}
	if o.Binary == "" {
		return nil, fmt.Errorf("no %s binary: set %s or -peer-bin (docs/benchmarks.md says how to build it)", o.Name, EnvInbucket)
	}
	var err error
	for range 3 {
		var s *Server
		if s, err = startInbucket(ctx, o); err == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

// inbucketEnv returns the environment that runs Inbucket on the given
// addresses with its memory store, no per-mailbox cap (0 turns it off), no
// retention scan (0 turns it off), no total size limit (the memory store's
// maxkb parameter is not set) and JSON logs at info level, so that the
// listeners' lines can be read.
func inbucketEnv(smtp, web, pop3 string) []string {
	return []string{
		"INBUCKET_SMTP_ADDR=" + smtp,
		"INBUCKET_WEB_ADDR=" + web,
		"INBUCKET_POP3_ADDR=" + pop3,
		"INBUCKET_STORAGE_TYPE=memory",
		"INBUCKET_STORAGE_MAILBOXMSGCAP=0",
		"INBUCKET_STORAGE_RETENTIONPERIOD=0",
		"INBUCKET_MAILBOXNAMING=local",
		"INBUCKET_LOGLEVEL=info",
		"INBUCKET_WEB_MONITORVISIBLE=false",
	}
}

func startInbucket(ctx context.Context, o PeerOptions) (*Server, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "mailsink-bench-inbucket-")
	if err != nil {
		return nil, err
	}
	s := &Server{exited: make(chan struct{}), dataDir: dir}
	s.Backend = PeerInbucket
	s.API = APIInbucket
	// The working directory is empty, so no inbucket.lua or UI files of
	// another run are picked up (the UI's absence is logged, not fatal).
	s.cmd = exec.Command(o.Binary, "-logjson")
	s.cmd.Dir = dir
	s.cmd.Env = append(withoutEnvPrefix(os.Environ(), "INBUCKET_"), inbucketEnv(ports[0], ports[1], ports[2])...)
	stderr, err := s.launch(s.cmd.StderrPipe)
	if err != nil {
		return nil, err
	}

	listening := make(chan inbucketListeners, 1)
	go func() {
		var l inbucketListeners
		sent := false
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if o.Log != nil {
				fmt.Fprintln(o.Log, sc.Text())
			}
			l.read(sc.Bytes())
			if !sent && l.SMTP != "" && l.HTTP != "" {
				listening <- l
				sent = true
			}
		}
		if !sent {
			close(listening)
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case l, ok := <-listening:
		if !ok {
			err = fmt.Errorf("%s exited before it named its listeners", o.Name)
			break
		}
		s.SMTP = l.SMTP
		s.HTTP = "http://" + l.HTTP
		err = s.waitAnswers(ctx, 30*time.Second)
	case <-time.After(30 * time.Second):
		err = fmt.Errorf("%s did not name its listeners within 30s", o.Name)
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// inbucketListeners are the addresses Inbucket's log says it listens on.
type inbucketListeners struct{ SMTP, HTTP string }

// read takes one line of Inbucket's JSON log and keeps the address of a
// "SMTP listening on tcp4" or "HTTP listening on tcp4" line.
func (l *inbucketListeners) read(line []byte) {
	var entry struct {
		Message string `json:"message"`
		Addr    string `json:"addr"`
	}
	if json.Unmarshal(line, &entry) != nil || entry.Addr == "" {
		return
	}
	switch entry.Message {
	case "SMTP listening on tcp4":
		l.SMTP = entry.Addr
	case "HTTP listening on tcp4":
		l.HTTP = entry.Addr
	}
}

// waitAnswers polls until the SMTP listener greets with 220 and the HTTP
// API answers 200: the log line comes before the listener serves.
func (s *Server) waitAnswers(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	client := NewClient(s.HTTP, "", 1)
	client.API = s.API
	defer client.HTTP.CloseIdleConnections()
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("%s exited: %v", s.Backend, s.waitErr)
		default:
		}
		if last = greets(ctx, s.SMTP); last == nil {
			if _, last = client.fetchList(ctx, "ready@bench.test", 1, 0); last == nil {
				return nil
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer within %s: %v", s.Backend, limit, last)
}

// greets dials addr and reads one line, which must start with 220.
func greets(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "220") {
		return fmt.Errorf("greeting %q", strings.TrimSpace(line))
	}
	c.Write([]byte("QUIT\r\n"))
	return nil
}

// freePorts returns n loopback addresses whose ports were free a moment
// ago: all n are held open at once, so they differ, then closed for the
// peer to take.
func freePorts(n int) ([]string, error) {
	var (
		addrs []string
		ls    []net.Listener
	)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

// inbucketItem is the part of an Inbucket message header the tool reads.
type inbucketItem struct {
	ID      string   `json:"id"`
	Subject string   `json:"subject"`
	To      []string `json:"to"`
}

// decodeInbucketList reads Inbucket's mailbox listing into list items.
func decodeInbucketList(body []byte) ([]listItem, error) {
	var page []inbucketItem
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, fmt.Errorf("mailbox answer: %v", err)
	}
	out := make([]listItem, len(page))
	for i, it := range page {
		out[i] = listItem{ID: it.ID, Subject: &page[i].Subject}
		if len(it.To) > 0 {
			out[i].Recipient = it.To[0]
		}
	}
	return out, nil
}

// inbucketListRequest builds GET /api/v1/mailbox/{address}.
func inbucketListRequest(ctx context.Context, base, recipient string) (*http.Request, error) {
	return http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/mailbox/"+url.PathEscape(recipient), nil)
}
