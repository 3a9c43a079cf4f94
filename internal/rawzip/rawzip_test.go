package rawzip

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// corpus returns the mailparse test messages: real-world mail, broken
// messages included.
func corpus(tb testing.TB) map[string][]byte {
	tb.Helper()
	msgs := map[string][]byte{}
	root := filepath.Join("..", "mailparse", "testdata")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".eml") {
			return err
		}
		b, err := os.ReadFile(path)
		msgs[path] = b
		return err
	})
	if err != nil || len(msgs) == 0 {
		tb.Fatalf("corpus: %d messages, %v", len(msgs), err)
	}
	return msgs
}

func TestRoundTripCorpus(t *testing.T) {
	var in, out int
	for name, raw := range corpus(t) {
		frame, ok := Compress(raw)
		if !ok {
			continue
		}
		got, err := Decompress(frame, len(raw))
		if err != nil || !bytes.Equal(got, raw) {
			t.Fatalf("%s: round trip: %v", name, err)
		}
		in, out = in+len(raw), out+len(frame)
	}
	if out == 0 || out >= in {
		t.Fatalf("corpus compressed %d -> %d bytes", in, out)
	}
	t.Logf("corpus messages that compressed: %d -> %d bytes", in, out)
}

func TestCompressDeclines(t *testing.T) {
	random := make([]byte, 4096)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	for name, raw := range map[string][]byte{
		"random bytes": random,
		"tiny":         []byte("Subject: x\r\n\r\n"),
		"over MaxSize": bytes.Repeat([]byte("a"), MaxSize+1),
	} {
		if got, ok := Compress(raw); ok || got != nil {
			t.Errorf("%s: Compress = %d bytes, %v; want nil, false", name, len(got), ok)
		}
	}
}

// A Compressor gives the frames Compress gives, whatever the sizes of the
// messages before (its scratch buffers are reused, large and small), and
// declines what Compress declines. A frame stays as it is until it is
// released, while other calls, here and in other goroutines, compress.
func TestCompressorMatchesCompress(t *testing.T) {
	var msgs [][]byte
	for _, raw := range corpus(t) {
		msgs = append(msgs, raw)
	}
	random := make([]byte, 100<<10)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	msgs = append(msgs, random, []byte("tiny"), bytes.Repeat([]byte("a"), MaxSize+1),
		bytes.Repeat([]byte("To: someone@example.com\r\n"), 40000))
	want := make([][]byte, len(msgs))
	for i, raw := range msgs {
		want[i], _ = Compress(raw)
	}
	var c Compressor
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			order := rand.New(rand.NewPCG(uint64(g), 5)).Perm(len(msgs))
			for k, i := range order {
				frame, ok := c.Compress(msgs[i])
				next, _ := c.Compress(msgs[order[(k+1)%len(order)]]) // another call before the check
				if ok != (want[i] != nil) || !bytes.Equal(frame, want[i]) {
					t.Errorf("goroutine %d, message %d (%d bytes): Compressor gave %d bytes, %v; Compress %d bytes",
						g, i, len(msgs[i]), len(frame), ok, len(want[i]))
				}
				c.Release(next)
				c.Release(frame)
			}
		})
	}
	wg.Wait()
}

func TestDecompressRefusesBadInput(t *testing.T) {
	raw := []byte(strings.Repeat("To: someone@example.com\r\n", 40))
	frame, ok := Compress(raw)
	if !ok {
		t.Fatal("repetitive header not compressed")
	}
	for name, tc := range map[string]struct {
		frame []byte
		size  int
	}{
		"wrong size":   {frame, len(raw) - 1},
		"larger size":  {frame, len(raw) + 1},
		"truncated":    {frame[:len(frame)/2], len(raw)},
		"not zstd":     {raw, len(raw)},
		"negative":     {frame, -1},
		"over MaxSize": {frame, MaxSize + 1},
	} {
		if got, err := Decompress(tc.frame, tc.size); !errors.Is(err, ErrCorrupt) || got != nil {
			t.Errorf("%s: Decompress = %q, %v; want nil, ErrCorrupt", name, got, err)
		}
	}
}

func FuzzRoundTrip(f *testing.F) {
	for _, raw := range corpus(f) {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		frame, ok := Compress(raw)
		if !ok {
			return
		}
		got, err := Decompress(frame, len(raw))
		if err != nil || !bytes.Equal(got, raw) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func FuzzDecompress(f *testing.F) {
	f.Add([]byte{10, 0x24, 'a', 'b', 'c'}, 10)
	f.Fuzz(func(t *testing.T, frame []byte, size int) {
		got, err := Decompress(frame, size)
		if err == nil && len(got) != size {
			t.Fatalf("decoded %d bytes, want %d", len(got), size)
		}
	})
}

// BenchmarkCompress reports the cost per message of the corpus and the
// ratio it reaches (compressed bytes per raw byte, over the messages that
// compress).
func BenchmarkCompress(b *testing.B) {
	var msgs [][]byte
	var total int
	for _, raw := range corpus(b) {
		msgs = append(msgs, raw)
		total += len(raw)
	}
	b.SetBytes(int64(total / len(msgs)))
	b.ResetTimer()
	var in, out int
	for i := 0; b.Loop(); i++ {
		raw := msgs[i%len(msgs)]
		frame, ok := Compress(raw)
		if ok {
			in, out = in+len(raw), out+len(frame)
		}
	}
	if in > 0 {
		b.ReportMetric(float64(out)/float64(in), "ratio")
	}
}

// BenchmarkCompressor compresses 100 KB messages, text that compresses and
// an attachment that does not, with Compress and with a Compressor, as the
// stores do: the frame copied after the raw source's size.
func BenchmarkCompressor(b *testing.B) {
	random := make([]byte, 75<<10)
	r := rand.New(rand.NewPCG(5, 6))
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	attachment := make([]byte, 0, 100<<10)
	attachment = append(attachment, "Content-Type: application/octet-stream\r\n\r\n"...)
	attachment = base64.StdEncoding.AppendEncode(attachment, random)
	text := bytes.Repeat([]byte("Dear customer, your order 12345 has shipped.\r\n"), 100<<10/46)
	store := func(frame []byte) []byte { return bytes.Join([][]byte{[]byte("12345"), frame}, nil) }
	for name, raw := range map[string][]byte{"text": text, "attachment": attachment} {
		b.Run(name+"/Compress", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				frame, ok := Compress(raw)
				if !ok {
					frame = raw
				}
				store(frame)
			}
		})
		b.Run(name+"/Compressor", func(b *testing.B) {
			var c Compressor
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				frame, ok := c.Compress(raw)
				if !ok {
					store(raw)
					continue
				}
				store(frame)
				c.Release(frame)
			}
		})
	}
}

func BenchmarkDecompress(b *testing.B) {
	type pair struct {
		frame []byte
		size  int
	}
	var frames []pair
	for _, raw := range corpus(b) {
		if frame, ok := Compress(raw); ok {
			frames = append(frames, pair{frame, len(raw)})
		}
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		p := frames[i%len(frames)]
		if _, err := Decompress(p.frame, p.size); err != nil {
			b.Fatal(err)
		}
	}
}
