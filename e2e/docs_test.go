package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/testenv"
)

// docBlock is one fenced sh block of a Markdown file, with the docs-test
// marker on the line before its fence, if any.
type docBlock struct {
	line int    // of the opening fence
	mode string // "", "server", "repo", "container" or "skip"
	why  string // a skip's reason
	code string
}

var docsMarker = regexp.MustCompile(`^<!-- docs-test: (server|repo|container|skip: (.+)) -->$`)

// docBlocks returns the sh blocks of a Markdown file, in order.
func docBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		out       []docBlock
		cur       *docBlock
		inCode    bool
		prev      string
		generated bool // inside <!-- BEGIN x --> ... <!-- END x -->
	)
	for i, line := range strings.Split(string(data), "\n") {
		switch {
		case !inCode && strings.HasPrefix(line, "<!-- BEGIN "):
			generated = true
		case !inCode && strings.HasPrefix(line, "<!-- END "):
			generated = false
		case !inCode && strings.HasPrefix(line, "```"):
			inCode = true
			if lang, _, _ := strings.Cut(strings.TrimPrefix(line, "```"), " "); lang == "sh" {
				cur = &docBlock{line: i + 1}
				if generated {
					cur.mode, cur.why = "skip", "the commands of a generated benchmark run (make bench and friends run them again)"
				} else if m := docsMarker.FindStringSubmatch(prev); m != nil {
					cur.mode, cur.why = m[1], m[2]
					if m[2] != "" {
						cur.mode = "skip"
					}
				} else if strings.HasPrefix(prev, "<!-- docs-test") {
					t.Errorf("%s:%d: marker %q is none of server, repo, container, skip: REASON", path, i, prev)
				}
			}
		case inCode && line == "```":
			inCode = false
			if cur != nil {
				out = append(out, *cur)
				cur = nil
			}
		case inCode && cur != nil:
			cur.code += line + "\n"
		}
		if strings.TrimSpace(line) != "" {
			prev = strings.TrimSpace(line)
		}
	}
	return out
}

// docsPorts are the ports the examples name; each file's run maps them to
// free loopback ports of its own.
var docsPorts = []string{"1025", "8025", "1465", "8443", "6379", "2025", "9025", "1143", "1110"}

var (
	portRef  = regexp.MustCompile(`(=|127\.0\.0\.1|localhost|\s|--port )(:?)(\d{4,5})\b`)
	docsLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)

// docsPrelude runs before each block: curl fails on an HTTP error status
// (unless the block asks for -f itself), and `make run` runs the binary
// under test.
const docsPrelude = `curl() {
  local a
  for a in "$@"; do case "$a" in --fail|--fail-with-body|-[!-]*f*) command curl "$@"; return;; esac; done
  command curl --fail-with-body "$@"
}
make() { if [ "${1:-}" = run ]; then shift; exec mailsink serve "$@"; fi; command make "$@"; }
`

// docsRun is the run of one Markdown file's examples.
type docsRun struct {
	t      *testing.T
	path   string
	dir    string // the file's working directory
	env    []string
	ports  map[string]string
	server *exec.Cmd
	exited chan struct{} // closed when the server block's shell has exited
	nth    int
	logs   *testenv.SyncBuffer // the server block's output
}

// TestDocsExamples runs every sh block of README.md and docs/*.md as
// written, against the mailsink binary, each file in a directory of its own
// (docs/development.md, "The docs' examples", says how blocks are marked).
// It also checks that every relative link of those files points at a file
// and heading that exist.
func TestDocsExamples(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "jq", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("the docs' examples need %s", tool)
			}
			t.Skipf("the docs' examples need %s", tool)
		}
	}
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../README.md"}, files...)
	bin := t.TempDir()
	if err := os.Symlink(binary, filepath.Join(bin, "mailsink")); err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		t.Run(strings.TrimPrefix(path, "../"), func(t *testing.T) {
			t.Parallel()
			checkLinks(t, path)
			blocks := docBlocks(t, path)
			if len(blocks) == 0 {
				return
			}
			r := newDocsRun(t, path, bin)
			defer r.stopServer()
			for _, b := range blocks {
				r.run(b)
			}
		})
	}
}

func newDocsRun(t *testing.T, path, bin string) *docsRun {
	r := &docsRun{t: t, path: path, dir: t.TempDir(), ports: map[string]string{}}
	for _, p := range docsPorts {
		r.ports[p] = freePort(t)
	}
	r.env = []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "GOBIN=" + t.TempDir(),
		"MAILSINK_HTTP_ADDR=127.0.0.1:" + r.ports["8025"], "MAILSINK_SMTP_ADDR=127.0.0.1:" + r.ports["1025"]}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MAILSINK_") && !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "GOBIN=") {
			r.env = append(r.env, kv)
		}
	}
	return r
}

// mapPorts rewrites the example's ports (host:port, =:port, --port N) to
// the run's; a port it does not know fails the test rather than being used
// as written.
func (r *docsRun) mapPorts(b docBlock) string {
	return portRef.ReplaceAllStringFunc(b.code, func(m string) string {
		sub := portRef.FindStringSubmatch(m)
		prefix, colon, port := sub[1], sub[2], sub[3]
		if (prefix == "--port ") == (colon == ":") {
			return m // "--port:1025" or " 1025": not a port
		}
		mapped, ok := r.ports[port]
		if !ok {
			r.t.Errorf("%s:%d: port %s is not in docsPorts: add it there so that the test does not use it as written", r.path, b.line, port)
			return m
		}
		switch prefix {
		case "=", " ", "\t", "\n":
			return prefix + "127.0.0.1:" + mapped
		}
		return prefix + colon + mapped
	})
}

func (r *docsRun) run(b docBlock) {
	t := r.t
	where := fmt.Sprintf("%s:%d", strings.TrimPrefix(r.path, "../"), b.line)
	switch b.mode {
	case "skip":
		t.Logf("%s not run: %s", where, b.why)
		return
	case "container":
		if os.Getenv("MAILSINK_TEST_CONTAINERS") != "1" || exec.Command("docker", "info").Run() != nil {
			t.Logf("%s not run: a container example, run only with MAILSINK_TEST_CONTAINERS=1 and a container engine", where)
			return
		}
	case "server":
		if _, err := exec.LookPath("redis-server"); err != nil && strings.Contains(b.code, "redis-server") {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s needs redis-server", where)
			}
			t.Skipf("%s needs redis-server; the file's later examples are skipped too", where)
		}
		r.startServer(where, r.mapPorts(b))
		return
	}
	if r.server == nil {
		r.startServer(where+" (the default server)", "MAILSINK_API_KEY=dev-key mailsink\n")
	}
	dir := r.dir
	if b.mode == "repo" || b.mode == "container" {
		dir = ".."
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", docsPrelude+r.mapPorts(b))
	cmd.Dir, cmd.Env = dir, r.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what the block left in the background
	}
	if err != nil {
		t.Errorf("%s failed: %v\n--- the block:\n%s--- its output:\n%s--- the server's:\n%s", where, err, b.code, tail(out), tail([]byte(r.logs.String())))
	}
}

// startServer runs a server block in the background, in place of the
// running one, and waits until its mailsink answers /readyz.
func (r *docsRun) startServer(where, code string) {
	t := r.t
	r.stopServer()
	r.nth++
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", docsPrelude+code)
	cmd.Dir = r.dir
	cmd.Env = append(r.env, "MAILSINK_DATA_DIR="+filepath.Join(r.dir, "data-"+strconv.Itoa(r.nth)))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r.logs = &testenv.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = r.logs, r.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.server = cmd
	exited := make(chan struct{})
	r.exited = exited
	go func() { cmd.Wait(); close(exited) }()
	url := "http://127.0.0.1:" + r.ports["8025"] + "/readyz"
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			r.server = nil
			t.Fatalf("%s: the server exited:\n%s", where, tail([]byte(r.logs.String())))
		default:
		}
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: mailsink was not ready in 30s:\n%s", where, tail([]byte(r.logs.String())))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopServer ends the running server block's processes: SIGTERM, then
// SIGKILL after 10 s.
func (r *docsRun) stopServer() {
	if r.server == nil {
		return
	}
	pgid := r.server.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(10 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-r.exited
	}
	syscall.Kill(-pgid, syscall.SIGKILL) // a background process the block started (redis-server)
	r.server = nil
}

func tail(b []byte) []byte {
	if len(b) > 4000 {
		return append([]byte("...\n"), b[len(b)-4000:]...)
	}
	return b
}

// checkLinks checks that each relative link of a Markdown file names a file
// of the repository, and, with #anchor, a heading of that file.
func checkLinks(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	inCode := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode {
			continue
		}
		for _, m := range docsLink.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			resolved := path
			if file != "" {
				resolved = filepath.Join(filepath.Dir(path), file)
			}
			if _, err := os.Stat(resolved); err != nil {
				t.Errorf("%s:%d: link %s: no such file", path, n, target)
				continue
			}
			if anchor != "" && !hasAnchor(t, resolved, anchor) {
				t.Errorf("%s:%d: link %s: %s has no heading #%s", path, n, target, file, anchor)
			}
		}
	}
}

var slugDrop = regexp.MustCompile(`[^\p{L}\p{N} _-]`)

// hasAnchor reports whether a Markdown file has a heading whose GitHub
// anchor is anchor.
func hasAnchor(t *testing.T, path, anchor string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := strings.ReplaceAll(slugDrop.ReplaceAllString(strings.ToLower(title), ""), " ", "-")
		if slug == anchor {
			return true
		}
	}
	return false
}
