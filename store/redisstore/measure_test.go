package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/store"
)

// smtpLikeBody returns the body ingest stores for a message of about size
// bytes that came over SMTP: the raw source unparsed, with a transcript.
// The text lines are those of the load tool's plain messages.
func smtpLikeBody(i, size int) *store.Body {
	return smtpBody(i, size, false)
}

// smtpBody is smtpLikeBody, with text that does not compress (random
// printable characters) when random is set.
func smtpBody(i, size int, random bool) *store.Body {
	var b strings.Builder
	fmt.Fprintf(&b, "From: Load Tool <sender@bench.test>\r\nTo: r%d.run@bench.test\r\nSubject: bench run m%d\r\n", i%100, i)
	fmt.Fprintf(&b, "Date: Sun, 22 Nov 2026 12:00:00 +0000\r\nMessage-ID: <m%d.run@bench.test>\r\nMIME-Version: 1.0\r\n", i)
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\n\r\n")
	const line = "The quick brown fox jumps over the lazy dog; a load test line.\r\n"
	r := rand.New(rand.NewPCG(uint64(i), 7))
	for b.Len()+len(line) <= size {
		if !random {
			b.WriteString(line)
			continue
		}
		for range len(line) - 2 {
			b.WriteByte(byte(0x21 + r.IntN(94)))
		}
		b.WriteString("\r\n")
	}
	b.WriteString(strings.Repeat("x", max(size-b.Len()-2, 0)) + "\r\n")
	return &store.Body{Raw: []byte(b.String()), Transcript: &store.Transcript{
		ClientAddress: "127.0.0.1:41234",
		Helo:          "localhost",
		Mail:          store.TranscriptCommand{Address: "sender@bench.test", Params: []string{"BODY=8BITMIME"}, Reply: "250 2.0.0 Roger, accepting mail from <sender@bench.test>"},
		Rcpts:         []store.TranscriptCommand{{Address: fmt.Sprintf("r%d.run@bench.test", i%100), Reply: "250 2.0.0 I'll make sure <r.run@bench.test> gets this"}},
		Data:          "250 2.0.0 OK: queued",
	}}
}

// keyKind names the kind of a key of the store for the memory breakdown.
func keyKind(prefix, key string) string {
	_, rest, ok := strings.Cut(strings.TrimPrefix(key, prefix), "}:")
	if !ok {
		return "other"
	}
	for _, k := range []string{"e:", "b:", "r:", "s:", "st:", "f:", "idem:"} {
		if strings.HasPrefix(rest, k) {
			return k
		}
	}
	return rest
}

// TestMeasureMemory stores MAILSINK_TEST_MEASURE emails of 2 KB, one
// recipient each, as SMTP ingest does, and logs what Redis holds per email
// by kind of key (MEMORY USAGE ... SAMPLES 0 of every key under the test's
// prefix) and, from INFO, used_memory, the commands and the CPU of
// redis-server per email. INFO figures are the whole server's: run it on a
// Redis of its own (MAILSINK_TEST_REDIS_URL) for them to mean anything.
//
//	MAILSINK_TEST_REDIS_URL=redis://127.0.0.1:6711/0 MAILSINK_TEST_MEASURE=20000 \
//	  go test -run TestMeasureMemory -v -count=1 ./store/redisstore/
//
// With MAILSINK_TEST_MEASURE_RANDOM=1 the text of the messages is random
// printable characters, which S2 does not compress.
func TestMeasureMemory(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("MAILSINK_TEST_MEASURE"))
	random := os.Getenv("MAILSINK_TEST_MEASURE_RANDOM") != ""
	if n <= 0 {
		t.Skip("MAILSINK_TEST_MEASURE not set")
	}
	s := newTestStore(t, backends[0])
	ctx := context.Background()
	c := s.client.(*redis.Client)
	before := serverInfo(t, c)
	var wg sync.WaitGroup
	var rawTotal int64
	var mu sync.Mutex
	const workers = 8
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				body := smtpBody(i, 2048, random)
				e := testEmail(acct, fmt.Sprintf("r%d.run@bench.test", i%100), "sender@bench.test", 1700000000000+int64(i))
				e.RawSize = int64(len(body.Raw))
				e.Subject = ptr(fmt.Sprintf("bench run m%d", i))
				if err := s.CreateEmails(ctx, body, []*store.Email{e}); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				rawTotal += e.RawSize
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	after := serverInfo(t, c)
	t.Logf("%d emails, raw %.0f B each, in %v", n, float64(rawTotal)/float64(n), elapsed.Round(time.Millisecond))
	t.Logf("used_memory +%.0f B per email", (after["used_memory"]-before["used_memory"])/float64(n))
	t.Logf("redis-server CPU %.1f µs per email", (after["cpu"]-before["cpu"])*1e6/float64(n))
	var cmds []string
	for k, v := range after {
		if strings.HasPrefix(k, "calls_") && v-before[k] > 0 {
			cmds = append(cmds, fmt.Sprintf("%s %.2f (%.1f µs)", strings.TrimPrefix(k, "calls_"),
				(v-before[k])/float64(n), (after["usec_"+k[6:]]-before["usec_"+k[6:]])/float64(n)))
		}
	}
	sort.Strings(cmds)
	t.Logf("commands per email (usec per email): %s", strings.Join(cmds, ", "))

	sums := map[string]int64{}
	counts := map[string]int{}
	iter := c.Scan(ctx, 0, escapeGlob(s.prefix)+"*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		u, err := c.MemoryUsage(ctx, key, 0).Result()
		if err != nil {
			t.Fatal(err)
		}
		kind := keyKind(s.prefix, key)
		sums[kind] += u
		counts[kind]++
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	var total int64
	var kinds []string
	for k, v := range sums {
		total += v
		enc, _ := c.ObjectEncoding(ctx, sampleKey(t, c, s.prefix, k)).Result()
		kinds = append(kinds, fmt.Sprintf("%s %d keys (%s) %.0f B", k, counts[k], enc, float64(v)/float64(n)))
	}
	sort.Strings(kinds)
	t.Logf("MEMORY USAGE per email: total %.0f B: %s", float64(total)/float64(n), strings.Join(kinds, "; "))
}

// sampleKey returns one key of kind under prefix.
func sampleKey(t *testing.T, c *redis.Client, prefix, kind string) string {
	ctx := context.Background()
	iter := c.Scan(ctx, 0, escapeGlob(prefix)+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if keyKind(prefix, iter.Val()) == kind {
			return iter.Val()
		}
	}
	return ""
}

// serverInfo returns used_memory, the CPU of redis-server in seconds (cpu)
// and, per command, calls_<cmd> and usec_<cmd> from INFO.
func serverInfo(t *testing.T, c *redis.Client) map[string]float64 {
	t.Helper()
	info, err := c.Info(context.Background(), "memory", "cpu", "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch {
		case k == "used_memory":
			out[k], _ = strconv.ParseFloat(v, 64)
		case k == "used_cpu_user" || k == "used_cpu_sys":
			f, _ := strconv.ParseFloat(v, 64)
			out["cpu"] += f
		case strings.HasPrefix(k, "cmdstat_"):
			cmd := strings.TrimPrefix(k, "cmdstat_")
			for _, f := range strings.Split(v, ",") {
				name, val, _ := strings.Cut(f, "=")
				if name == "calls" || name == "usec" {
					out[name+"_"+cmd], _ = strconv.ParseFloat(val, 64)
				}
			}
		}
	}
	return out
}
