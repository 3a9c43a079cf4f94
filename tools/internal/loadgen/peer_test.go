package loadgen

import (
	"bytes"
	"compress/gzip"
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

func TestInbucketListeners(t *testing.T) {
	log := []string{
		`{"level":"info","phase":"startup","version":"v3.1.1","message":"Inbucket starting"}`,
		`{"level":"error","module":"web","phase":"startup","path":"ui/dist/index.html","message":"Failed to parse HTML template"}`,
		`{"level":"info","module":"web","phase":"startup","addr":"127.0.0.1:36495","message":"HTTP listening on tcp4"}`,
		`{"level":"info","module":"pop3","phase":"startup","addr":"127.0.0.1:40001","message":"POP3 listening on tcp4"}`,
		`not json at all`,
		`{"level":"info","module":"smtp","phase":"startup","addr":"127.0.0.1:38683","message":"SMTP listening on tcp4"}`,
	}
	var l inbucketListeners
	for i, line := range log {
		l.read([]byte(line))
		if i == 2 && (l.HTTP != "127.0.0.1:36495" || l.SMTP != "") {
			t.Errorf("after the HTTP line: %+v", l)
		}
	}
	if want := (inbucketListeners{SMTP: "127.0.0.1:38683", HTTP: "127.0.0.1:36495"}); l != want {
		t.Errorf("got %+v, want %+v", l, want)
	}
}

func TestFreePorts(t *testing.T) {
	addrs, err := freePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a)
		if err != nil || host != "127.0.0.1" || seen[a] {
			t.Errorf("addresses %v: want three distinct 127.0.0.1:port", addrs)
		}
		seen[a] = true
		// Closed again: the peer can listen there.
		l, err := net.Listen("tcp4", a)
		if err != nil {
			t.Errorf("listen %s again: %v", a, err)
			continue
		}
		l.Close()
	}
}

func TestDecodeInbucketList(t *testing.T) {
	body := []byte(`[{"mailbox":"r1.x","id":"1","from":"<a@b>","to":["<r1.x@bench.test>"],"subject":"bench x m4","size":10},
		{"mailbox":"r1.x","id":"2","to":[],"subject":"bench x m9"}]`)
	items, err := (&Client{API: APIInbucket}).decodeList(body)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 2 || *items[0].Subject != "bench x m4" || *items[1].Subject != "bench x m9" || items[0].Recipient != "<r1.x@bench.test>" || items[1].ID != "2" {
		t.Errorf("got %+v", items)
	}
}

// TestPeerInbucket runs small ingest and list scenarios against a real
// Inbucket when MAILSINK_BENCH_INBUCKET names its binary.
func TestPeerInbucket(t *testing.T) {
	bin := os.Getenv(EnvInbucket)
	if bin == "" {
		t.Skip(EnvInbucket + " not set (docs/benchmarks.md says how to build Inbucket)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := StartPeer(ctx, PeerOptions{Name: PeerInbucket, Binary: bin})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(srv.dataDir); !os.IsNotExist(err) {
			t.Errorf("working directory %s left behind: %v", srv.dataDir, err)
		}
	}()
	r := NewRunner(srv.Target, srv, nil)
	for _, s := range []Scenario{
		// More messages per mailbox than Inbucket's default cap of 500.
		{Name: "reuse", Kind: "ingest", Messages: 1200, Connections: 4, Reuse: true, Size: 2048, Shape: ShapePlain, Recipients: 2, PerMessage: 1, Verify: true},
		{Name: "newconn", Kind: "ingest", Messages: 30, Connections: 2, Size: 2048, Shape: ShapePlain, Recipients: 3, PerMessage: 2, Verify: true},
		{Name: "list", Kind: "list", AccountSize: 2000, Connections: 4, Reuse: true, Size: 1024, Shape: ShapePlain, Recipients: 40, PerMessage: 20,
			Queries: 50, QueryConns: 1, LoadConns: 2, LoadRate: 200},
	} {
		res, err := r.Run(ctx, s)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if s.Kind == "ingest" {
			if got, want := res.Verify.Found, s.Emails(); got != want || !res.Verify.OK() {
				t.Errorf("%s: found %d emails via Inbucket's API, want %d: %+v", s.Name, got, want, res.Verify)
			}
		} else {
			// The prefill tops the store up to 2,000 emails: 740 over 40
			// mailboxes, 18 or 19 each, and each answer is a whole mailbox.
			if res.Query.Requests != s.Queries || res.Query.Items < 18*s.Queries {
				t.Errorf("%s: %d requests listed %d emails; want %d requests of whole mailboxes of >= 18", s.Name, res.Query.Requests, res.Query.Items, s.Queries)
			}
			if res.Load == nil || res.Load.Sent == 0 || res.Load.Failed != 0 {
				t.Errorf("%s: ingest load during the requests: %+v", s.Name, res.Load)
			}
		}
		if res.After.CPU <= res.Before.CPU && res.After.RSS == 0 {
			t.Errorf("%s: /proc samples of Inbucket before %+v after %+v", s.Name, res.Before, res.After)
		}
	}
}

func TestMeasureFsync(t *testing.T) {
	dir := t.TempDir()
	for _, overwrite := range []bool{false, true} {
		res, err := MeasureFsync(context.Background(), dir, 20, 4096, time.Minute, overwrite)
		if err != nil {
			t.Fatal(err)
		}
		if res.Writes != 20 || len(res.Latency) != 20 || res.PerSecond() <= 0 {
			t.Errorf("overwrite %v: got %d writes, %d latencies, %.0f/s; want 20, 20, > 0", overwrite, res.Writes, len(res.Latency), res.PerSecond())
		}
		if !strings.Contains(res.Summary(), "fdatasyncs/s") || strings.Contains(res.Summary(), "over zeros") != overwrite {
			t.Errorf("overwrite %v: summary %q", overwrite, res.Summary())
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("probe file left behind: %v", left)
		}
	}
	// The time limit stops it, after at least one write.
	res, err := MeasureFsync(context.Background(), dir, 1_000_000, 4096, 0, false)
	if err != nil || res.Writes != 1 {
		t.Errorf("with no time: %d writes, %v; want 1", res.Writes, err)
	}
}

func TestFilesystem(t *testing.T) {
	df := "Filesystem     Type  1K-blocks     Used Available Use% Mounted on\n/dev/vda       ext4  264212084 14655468  80845796  16% /\n"
	if got, want := filesystem(df), "/dev/vda, ext4, mounted on /"; got != want {
		t.Errorf("filesystem(df) = %q, want %q", got, want)
	}
	if got := filesystem("(df: not found)"); got != "(df: not found)" {
		t.Errorf("filesystem of an error = %q", got)
	}
}

func TestDirSize(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/a", make([]byte, 1000), 0o600)
	os.Mkdir(dir+"/sub", 0o700)
	os.WriteFile(dir+"/sub/b", make([]byte, 24), 0o600)
	if n, err := dirSize(dir); err != nil || n != 1024 {
		t.Errorf("dirSize = %d, %v; want 1024", n, err)
	}
}

func TestScale(t *testing.T) {
	got := Scale(Standard(), 0.01)
	for i, s := range got {
		orig := Standard()[i]
		if s.Messages > orig.Messages || (orig.Messages > 0 && s.Messages < 1) || s.Queries > orig.Queries || s.AccountSize > orig.AccountSize {
			t.Errorf("%s: scaled %+v from %+v", s.Name, s, orig)
		}
		if s.PerMessage > s.Recipients {
			t.Errorf("%s: %d RCPTs per message over %d recipients", s.Name, s.PerMessage, s.Recipients)
		}
	}
	if s := find2(got, Ingest2KReuse); s.Messages != 300 {
		t.Errorf("%s scaled by 0.01: %d messages, want 300", Ingest2KReuse, s.Messages)
	}
	if s := Scale(Standard(), 1); len(s) != len(Standard()) || s[0] != Standard()[0] {
		t.Error("Scale by 1 changed the scenarios")
	}
}

func find2(ss []Scenario, name string) Scenario {
	for _, s := range ss {
		if s.Name == name {
			return s
		}
	}
	return Scenario{}
}

// TestProseBody checks that the plain body is prose, not a repeated line:
// many distinct words, no line twice, and it compresses about as English
// does (gzip of a 2 KB text: about half), not tenfold.
func TestProseBody(t *testing.T) {
	m, err := NewMessages("run1", 5, 1, 2048, ShapePlain)
	if err != nil {
		t.Fatal(err)
	}
	raw := m.Build(3, nil)
	if d := len(raw) - 2048; d < -10 || d > 10 {
		t.Errorf("%d bytes, want 2048", len(raw))
	}
	_, body, _ := bytes.Cut(raw, []byte("\r\n\r\n"))
	lines := map[string]bool{}
	words := map[string]bool{}
	for _, line := range strings.Split(string(body), "\r\n") {
		if line != "" && lines[line] {
			t.Errorf("line %q twice", line)
		}
		lines[line] = true
		if len(line) > 78 {
			t.Errorf("line of %d characters", len(line))
		}
		for _, w := range strings.Fields(line) {
			words[strings.ToLower(strings.Trim(w, ".,"))] = true
		}
	}
	if len(words) < 150 {
		t.Errorf("%d distinct words in %d bytes, want >= 150", len(words), len(body))
	}
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(raw)
	w.Close()
	if ratio := float64(len(raw)) / float64(z.Len()); ratio > 2.5 || ratio < 1.5 {
		t.Errorf("gzip ratio %.2f, want between 1.5 and 2.5 (English prose)", ratio)
	}
	if !bytes.Equal(raw, m.Build(3, nil)) {
		t.Error("the same message built twice differs")
	}
	if !bytes.HasSuffix(raw, []byte("\r\n")) || bytes.Contains(raw, []byte("\r\r")) || bytes.Contains(raw, []byte(" \r\n")) {
		t.Error("body does not end in CRLF, or has a bare CR or a trailing space")
	}
}
