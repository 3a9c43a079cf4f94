package boltstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mailsink/mailsink/store"
)

// words is the vocabulary of realisticMessage: text made of it compresses
// about as well as English prose does, unlike one line repeated.
var words = strings.Fields(`the of and to in is you that it he was for on are as with his they at be this have from
or one had by word but not what all were we when your can said there use an each which she do how their if will up
other about out many then them these so some her would make like him into time has look two more write go see number
no way could people my than first water been call who oil its now find long down day did get come made may part
invoice order shipment account password reset confirm meeting tomorrow report quarterly figures attached review
please regards thanks team project deadline update status customer support ticket release notes version server`)

// realisticMessage returns message i as a load tool would send it over
// SMTP: headers as tools/internal/loadgen writes them, then about size bytes of
// lines of random words.
func realisticMessage(r *rand.Rand, i, size int, recipient string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "From: Load Tool <sender@bench.test>\r\nTo: %s\r\nSubject: bench run m%d\r\n", recipient, i)
	fmt.Fprintf(&b, "Date: Sun, 22 Nov 2026 12:00:00 +0000\r\nMessage-ID: <m%d.run@bench.test>\r\nMIME-Version: 1.0\r\n", i)
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\n\r\n")
	line := 0
	for b.Len() < size-2 {
		w := words[r.IntN(len(words))]
		if line+len(w)+1 > 72 {
			b.WriteString("\r\n")
			line = 0
		} else if line > 0 {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(w)
		line += len(w)
	}
	b.WriteString("\r\n")
	return []byte(b.String())
}

// fillLikeSMTP stores n emails of about size bytes as ingest does for an
// SMTP delivery to one recipient (an unparsed body with its transcript),
// from conns concurrent writers, in account accountID, to 100 recipients.
func fillLikeSMTP(t testing.TB, s *Store, accountID string, n, conns, size int) (rawBytes int64) {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(c), 7))
			for i := c; i < n; i += conns {
				rcpt := fmt.Sprintf("r%d.run@bench.test", i%100)
				raw := realisticMessage(r, i, size, rcpt)
				now := time.Now().UTC().Truncate(time.Millisecond)
				e := &store.Email{
					ID: store.NewID(), AccountID: accountID, Sender: "sender@bench.test", Recipient: rcpt,
					Status: store.StatusReceived, Labels: []string{}, RawSize: int64(len(raw)),
					MessageID: ptr(fmt.Sprintf("<m%d.run@bench.test>", i)), Subject: ptr(fmt.Sprintf("bench run m%d", i)),
					ReceivedAt: now, CreatedAt: now, UpdatedAt: now,
				}
				body := &store.Body{Raw: raw, Transcript: &store.Transcript{
					ClientAddress: "127.0.0.1:" + strconv.Itoa(40000+c), Helo: "localhost",
					Mail: store.TranscriptCommand{Address: "sender@bench.test", Params: []string{},
						Reply: "250 2.0.0 Roger, accepting mail from <sender@bench.test>"},
					Rcpts: []store.TranscriptCommand{{Address: rcpt, Params: []string{},
						Reply: "250 2.0.0 I'll make sure <" + rcpt + "> gets this"}},
					Data: "250 2.0.0 OK: queued",
				}}
				if err := s.CreateEmails(ctx, body, []*store.Email{e}); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				rawBytes += int64(len(raw))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return rawBytes
}

// bucketUse is what one top-level bucket, with its nested buckets, takes in
// the file.
type bucketUse struct {
	name                          string
	keys                          int
	leaf, branch, overflow, inuse int
}

// spaceByBucket opens the file at path read-only and returns its buckets'
// page counts and bytes in use.
func spaceByBucket(t testing.TB, path string) ([]bucketUse, int) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out []bucketUse
	page := db.Info().PageSize
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			st := b.Stats()
			out = append(out, bucketUse{
				name: string(name), keys: st.KeyN,
				leaf: st.LeafPageN, branch: st.BranchPageN, overflow: st.LeafOverflowN + st.BranchOverflowN,
				inuse: st.LeafInuse + st.BranchInuse,
			})
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, page
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// spaceReport logs the file's size and its buckets' pages per email.
func spaceReport(t testing.TB, label, path string, n int, raw int64) {
	t.Helper()
	size := fileSize(t, path)
	t.Logf("%s: file %d bytes, %.0f B per email (raw %.0f B per email)", label, size, float64(size)/float64(n), float64(raw)/float64(n))
	buckets, page := spaceByBucket(t, path)
	for _, u := range buckets {
		pages := u.leaf + u.branch + u.overflow
		t.Logf("  %-9s keys %7d  leaf %6d branch %4d overflow %6d  in use %10d B  pages %8d B = %6.0f B/email (in use %6.0f)",
			u.name, u.keys, u.leaf, u.branch, u.overflow, u.inuse, pages*page,
			float64(pages*page)/float64(n), float64(u.inuse)/float64(n))
	}
}

// TestSpaceReport fills a store like the SMTP path does and logs where the
// bytes go before and after compaction, and the pages each commit wrote.
// It runs only when MAILSINK_SPACE_N gives the number of emails:
//
//	MAILSINK_SPACE_N=5000 go test -run TestSpaceReport -v ./store/boltstore
func TestSpaceReport(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("MAILSINK_SPACE_N"))
	if n <= 0 {
		t.Skip("MAILSINK_SPACE_N is not set")
	}
	size := 2048
	if v, err := strconv.Atoi(os.Getenv("MAILSINK_SPACE_SIZE")); err == nil {
		size = v
	}
	path := filepath.Join(t.TempDir(), "mailsink.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	before := s.db.Stats()
	raw := fillLikeSMTP(t, s, "6f1d5a8e-3c1b-4f7e-9a2d-5b8c0e4d7f10", n, 8, size)
	after := s.db.Stats()
	diff := after.Sub(&before)
	commits := s.commits.commits.Load()
	t.Logf("%d emails in %d commits: %.2f emails per commit, %.1f page writes per commit (%d pages allocated), write time %.0f µs per commit",
		n, commits, float64(n)/float64(commits), float64(diff.TxStats.GetWrite())/float64(commits),
		diff.TxStats.GetPageCount(), float64(diff.TxStats.GetWriteTime().Microseconds())/float64(commits))
	t.Logf("per commit: %.1f nodes, %.1f spilled, %.1f split, %.1f rebalanced, %.1f pages allocated",
		float64(diff.TxStats.GetNodeCount())/float64(commits), float64(diff.TxStats.GetSpill())/float64(commits),
		float64(diff.TxStats.GetSplit())/float64(commits), float64(diff.TxStats.GetRebalance())/float64(commits),
		float64(diff.TxStats.GetPageCount())/float64(commits))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	spaceReport(t, "after the fill", path, n, raw)
	b, a, err := Compact(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Compact: %d -> %d bytes", b, a)
	spaceReport(t, "after compaction", path, n, raw)
}

// TestSpaceBudget checks the budget for the embedded store: after
// compaction the file holds at most the raw sources plus 1 KB per email
// (and a few pages of its own), for 2 KB and 1.1 KB text messages stored
// as SMTP ingest stores them.
func TestSpaceBudget(t *testing.T) {
	t.Parallel()
	for _, size := range []int{2048, 1100} {
		path := filepath.Join(t.TempDir(), "mailsink.db")
		s := openTemp(t, path)
		const n = 1000
		raw := fillLikeSMTP(t, s, "6f1d5a8e-3c1b-4f7e-9a2d-5b8c0e4d7f10", n, 32, size)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		_, after, err := Compact(path)
		if err != nil {
			t.Fatal(err)
		}
		budget := raw + n*1024 + 16*4096
		t.Logf("%d emails of %d bytes: %d bytes after Compact, %d per email; budget %d", n, raw/n, after, after/n, budget)
		if after > budget {
			t.Errorf("%d emails of %d bytes take %d bytes after Compact, over the budget of %d", n, raw/n, after, budget)
		}
	}
}
