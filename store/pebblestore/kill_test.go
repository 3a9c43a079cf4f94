package pebblestore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
)

// killHelperEnv names the store directory when the test binary runs as the child
// of TestKillAfterAck.
const killHelperEnv = "PEBBLESTORE_KILL_HELPER_DIR"

// TestKillAfterAck runs a child process that creates emails from several
// goroutines and prints the id of each one CreateEmails acknowledged, kills it
// with SIGKILL while it writes, and checks that every acknowledged email is in
// the store, with its body and indexes.
func TestKillAfterAck(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "store")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillHelper$")
	cmd.Env = append(os.Environ(), killHelperEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked []string
	lines := bufio.NewScanner(out)
	for len(acked) < 300 && lines.Scan() {
		if id, ok := strings.CutPrefix(lines.Text(), "ack "); ok {
			acked = append(acked, id)
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() { // acks written before the kill landed
		if id, ok := strings.CutPrefix(lines.Text(), "ack "); ok {
			acked = append(acked, id)
		}
	}
	_ = cmd.Wait()
	if len(acked) < 300 {
		t.Fatalf("child acknowledged %d emails before it ended, want at least 300", len(acked))
	}

	ctx := context.Background()
	s := openTemp(t, path)
	for _, id := range acked {
		if _, err := s.GetEmail(ctx, "acct", id); err != nil {
			t.Fatalf("acknowledged email %s after kill -9: %v", id, err)
		}
		if _, err := s.GetBody(ctx, "acct", id); err != nil {
			t.Fatalf("body of acknowledged email %s after kill -9: %v", id, err)
		}
	}
	var listed int
	for offset := int64(0); ; offset += 100 {
		page, err := s.ListEmails(ctx, store.ListQuery{AccountID: "acct", Recipient: "r@example.com", Limit: 100, Offset: offset})
		if err != nil {
			t.Fatal(err)
		}
		listed += len(page)
		if len(page) < 100 {
			break
		}
	}
	bodies, err := s.BodyCount(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if listed < len(acked) || bodies != listed {
		t.Errorf("after kill -9: %d acknowledged, %d listed, %d bodies; want listed >= acknowledged and one body each", len(acked), listed, bodies)
	}
}

// TestKillHelper is the child of TestKillAfterAck; it does nothing in a
// normal run.
func TestKillHelper(t *testing.T) {
	path := os.Getenv(killHelperEnv)
	if path == "" {
		t.Skip("only runs as the child of TestKillAfterAck")
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second) // in case the parent is gone
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				now := time.Now().UTC()
				e := &store.Email{
					ID: store.NewID(), AccountID: "acct", Sender: "s@example.com", Recipient: "r@example.com",
					Status: store.StatusReceived, Labels: []string{}, ReceivedAt: now, CreatedAt: now, UpdatedAt: now,
				}
				if err := s.CreateEmails(ctx, &store.Body{Raw: []byte("raw")}, []*store.Email{e}); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				mu.Lock()
				fmt.Printf("ack %s\n", e.ID)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}
