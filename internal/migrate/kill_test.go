package migrate_test

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/migrate"
	"github.com/mailsink/mailsink/internal/migrate/boltv4"
	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/pebblestore"
)

// helperEnv names the data directory when the test binary runs as the
// child of a test below; helperRole says which child it is.
const (
	helperEnv  = "MIGRATE_HELPER_DIR"
	helperRole = "MIGRATE_HELPER_ROLE"
)

var quiet = slog.New(slog.DiscardHandler)

// account is the only account of the child's mailsink.
var account = config.DeriveAccountID("default")

// child starts the test binary as the helper of role on dir.
func child(t *testing.T, role, dir string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelper$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir, helperRole+"="+role)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, bufio.NewScanner(out)
}

// TestHelper is the child of the tests below; it does nothing in a normal
// run. As "smtp" it serves SMTP on the earlier release's store in the
// directory and prints its address; as "migrate" it migrates the directory.
func TestHelper(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("only runs as the child of the kill tests")
	}
	switch os.Getenv(helperRole) {
	case "smtp":
		st, err := boltv4.Open(filepath.Join(dir, migrate.OldFile))
		if err != nil {
			t.Fatal(err)
		}
		env := testenv.Start(t, testenv.Backend{Name: "v4", Open: func(*testing.T) store.Store { return st }}, func(c *config.Config) {
			c.Accounts = config.DefaultAccounts("k")
		})
		fmt.Printf("smtp %s\n", env.SMTP)
		time.Sleep(time.Minute) // until the parent kills it
	case "migrate":
		fmt.Println("migrating")
		if err := migrate.Run(context.Background(), dir, "store", quiet); err != nil {
			t.Fatal(err)
		}
		fmt.Println("migrated")
	}
}

// TestMigrateAfterKillUnderSMTPLoad kills an earlier release's mailsink
// with SIGKILL while eight clients send it mail, then migrates its data
// directory: every message answered 250 is in the new store, those only in
// the old store's write-ahead log included.
func TestMigrateAfterKillUnderSMTPLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	t.Parallel()
	dir := t.TempDir()
	cmd, lines := child(t, "smtp", dir)
	var addr string
	for addr == "" && lines.Scan() {
		addr, _ = strings.CutPrefix(lines.Text(), "smtp ")
	}
	if addr == "" {
		t.Fatal("the child printed no SMTP address")
	}
	var mu sync.Mutex
	var acked []string
	sent := 0
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := smtp.Dial(addr)
			if err != nil {
				return
			}
			defer c.Close()
			for i := 0; ; i++ {
				subject := fmt.Sprintf("m-%d-%d", g, i)
				mu.Lock()
				sent++
				mu.Unlock()
				if c.Mail("s@example.com") != nil || c.Rcpt("r@example.com") != nil {
					return
				}
				w, err := c.Data()
				if err != nil {
					return
				}
				fmt.Fprintf(w, "From: s@example.com\r\nTo: r@example.com\r\nSubject: %s\r\n\r\n%s\r\n", subject, strings.Repeat("body ", 400))
				if w.Close() != nil {
					return
				}
				mu.Lock()
				acked = append(acked, subject)
				mu.Unlock()
			}
		}()
	}
	testenv.WaitFor(t, 30*time.Second, "300 messages acknowledged", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 300
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	_ = cmd.Wait()

	if err := migrate.Run(context.Background(), dir, "store", quiet); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	st, err := pebblestore.Open(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stored := map[string]bool{}
	q := store.ListQuery{AccountID: account, Limit: 100}
	for {
		page, err := st.ListEmails(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			stored[*e.Subject] = true
		}
		if len(page) < q.Limit {
			break
		}
		q.Before = page[len(page)-1].ID
	}
	lost := 0
	for _, s := range acked {
		if !stored[s] {
			lost++
		}
	}
	t.Logf("killed under SMTP load, then migrated: sent %d, acknowledged %d, migrated %d, lost %d", sent, len(acked), len(stored), lost)
	if lost > 0 {
		t.Errorf("%d of %d acknowledged messages are not in the migrated store", lost, len(acked))
	}
}

// TestMigrationKilledMidway kills a migration with SIGKILL once it has
// written part of the new store: the earlier release's files are still in
// place and open with all their mail, and the next start migrates again,
// completely.
func TestMigrationKilledMidway(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	t.Parallel()
	dir := t.TempDir()
	const n = 2000
	ctx := context.Background()
	old, err := boltv4.Open(filepath.Join(dir, migrate.OldFile))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		raw := make([]byte, 8<<10) // random: it does not compress
		for j := range raw {
			raw[j] = byte(r.Uint32())
		}
		now := time.UnixMilli(1_767_225_600_000 + int64(i)).UTC()
		e := &store.Email{ID: store.NewID(), AccountID: account, Sender: "s@example.com", Recipient: "r@example.com",
			Status: store.StatusReceived, Labels: []string{}, RawSize: int64(len(raw)), ReceivedAt: now, CreatedAt: now, UpdatedAt: now}
		if err := old.CreateEmails(ctx, &store.Body{Raw: raw}, []*store.Email{e}); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	cmd, lines := child(t, "migrate", dir)
	if !lines.Scan() || lines.Text() != "migrating" {
		t.Fatal("the child did not start migrating")
	}
	partial := filepath.Join(dir, "store.migrating")
	testenv.WaitFor(t, 30*time.Second, "the migration to have written 4 MiB", func() bool { return dirSize(partial) >= 4<<20 })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if _, err := os.Stat(filepath.Join(dir, "store")); !os.IsNotExist(err) {
		t.Fatalf("the new store is in place after a migration killed midway: %v", err)
	}

	// The earlier release's directory is as usable as before.
	old, err = boltv4.Open(filepath.Join(dir, migrate.OldFile))
	if err != nil {
		t.Fatalf("the old store after a killed migration: %v", err)
	}
	if got, _, err := old.AccountStats(ctx, account); err != nil || got != n {
		t.Fatalf("the old store after a killed migration holds %d emails (%v), want %d", got, err, n)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	// The next start migrates it all.
	if err := migrate.Run(ctx, dir, "store", quiet); err != nil {
		t.Fatalf("migration after the kill: %v", err)
	}
	st, err := pebblestore.Open(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got, err := st.CountEmails(ctx, store.ListQuery{AccountID: account, Recipient: "r@example.com"}); err != nil || got != n {
		t.Errorf("the new store after the second migration lists %d emails (%v), want %d", got, err, n)
	}
	list, err := st.ListEmails(ctx, store.ListQuery{AccountID: account, Limit: 1})
	if err != nil || len(list) != 1 {
		t.Fatal(list, err)
	}
	if b, err := st.GetBody(ctx, account, list[0].ID); err != nil || len(b.Raw) != 8<<10 {
		t.Errorf("a migrated body: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, migrate.MovedDir, migrate.OldFile)); err != nil {
		t.Errorf("the old file once migrated: %v; want it kept in %s", err, migrate.MovedDir)
	}
}

// dirSize adds up the sizes of the files under dir (0 when there is none).
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
