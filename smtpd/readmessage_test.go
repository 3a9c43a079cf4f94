package smtpd

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/mailsink/mailsink/internal/gate"
)

// readMessage returns the message whole whatever its size relative to
// largeMessage and whatever size the client announced, and takes a
// large-transfer slot exactly when the message is over largeMessage.
func TestReadMessage(t *testing.T) {
	turns := gate.New(1, 1)
	s := New(Config{LargeGate: turns}, nil, nil, slog.New(slog.DiscardHandler))
	for _, size := range []int{0, 1, 4095, chunkSize - 1, chunkSize, chunkSize + 1, 5*chunkSize + 7, largeMessage - 1, largeMessage, largeMessage + 1, 2*largeMessage + 3} {
		for _, hint := range []int64{0, int64(size), 10, 3 * largeMessage} {
			t.Run(fmt.Sprintf("size=%d/hint=%d", size, hint), func(t *testing.T) {
				msg := randomMessage(uint64(size), size)
				raw, release, err := s.readMessage(context.Background(), time.Time{}, iotest.HalfReader(bytes.NewReader(msg)), hint, nil, "192.0.2.1", nil)
				if err != nil {
					t.Fatal(err)
				}
				if held, _ := turns.Counts(); held != btoi(size > largeMessage) {
					t.Errorf("%d slots taken, want %d", held, btoi(size > largeMessage))
				}
				release()
				if held, _ := turns.Counts(); held != 0 {
					t.Error("release left the slot taken")
				}
				if !bytes.Equal(raw, msg) {
					t.Errorf("read %d bytes, want the %d sent", len(raw), len(msg))
				}
			})
		}
	}
}

// randomMessage returns size bytes that do not repeat, so that a chunk read
// into the wrong place shows.
func randomMessage(seed uint64, size int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = byte(r.Uint32())
	}
	return msg
}

// The buffers a message is read into are reused for the next message, also
// by other sessions at once, so what readMessage returns must be a copy of
// its own: reading more messages must not change it.
func TestReadMessageKeepsEarlierMessages(t *testing.T) {
	s := New(Config{}, nil, nil, slog.New(slog.DiscardHandler))
	sizes := []int{10, chunkSize + 10, 3*chunkSize + 10}
	const sessions, each = 4, 6
	var wg sync.WaitGroup
	kept := make([][][]byte, sessions)
	for g := range sessions {
		wg.Go(func() {
			for i := range each {
				msg := randomMessage(uint64(g*each+i), sizes[(g+i)%len(sizes)])
				raw, release, err := s.readMessage(context.Background(), time.Time{}, iotest.HalfReader(bytes.NewReader(msg)), 0, nil, "192.0.2.1", nil)
				release()
				if err != nil || !bytes.Equal(raw, msg) {
					t.Errorf("session %d, message %d: read %d bytes, err %v", g, i, len(raw), err)
					return
				}
				kept[g] = append(kept[g], raw)
			}
		})
	}
	wg.Wait()
	for g, msgs := range kept {
		for i, raw := range msgs {
			if !bytes.Equal(raw, randomMessage(uint64(g*each+i), sizes[(g+i)%len(sizes)])) {
				t.Errorf("session %d, message %d changed after later reads", g, i)
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The part of a message every session may hold before it waits for a slot
// takes largeMessage+1 bytes of memory, not a growth step more.
func TestReadIntoStopsAtTheLimit(t *testing.T) {
	msg := bytes.Repeat([]byte("x"), 3*largeMessage)
	buf, done, err := readInto(iotest.HalfReader(bytes.NewReader(msg)), make([]byte, 0, 4096), largeMessage+1)
	if err != nil || done {
		t.Fatalf("readInto: done %v, err %v", done, err)
	}
	if len(buf) != largeMessage+1 || cap(buf) != largeMessage+1 {
		t.Errorf("len %d, cap %d; want both %d", len(buf), cap(buf), largeMessage+1)
	}
}

// A large message that waits for a slot gives up at its transfer's deadline
// (the deadline is a context only once the message waits).
func TestReadMessageWaitEndsAtTheDeadline(t *testing.T) {
	turns := gate.New(1, 1)
	give, err := turns.Acquire(context.Background(), "other")
	if err != nil {
		t.Fatal(err)
	}
	defer give()
	s := New(Config{LargeGate: turns}, nil, nil, slog.New(slog.DiscardHandler))
	msg := bytes.Repeat([]byte("x"), largeMessage+10)
	start := time.Now()
	_, release, err := s.readMessage(context.Background(), start.Add(50*time.Millisecond), bytes.NewReader(msg), 0, nil, "192.0.2.1", nil)
	release()
	if err != context.DeadlineExceeded {
		t.Fatalf("err %v, want context.DeadlineExceeded", err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond || waited > 5*time.Second {
		t.Errorf("gave up after %v, want about 50ms", waited)
	}
}

// BenchmarkReadMessage reads messages whose size the client did not
// announce from memory: the cost of the buffers, without the socket's.
func BenchmarkReadMessage(b *testing.B) {
	for _, size := range []int{2 << 10, 100 << 10, largeMessage} {
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			s := New(Config{}, nil, nil, slog.New(slog.DiscardHandler))
			msg := bytes.Repeat([]byte("0123456789abcdef"), size/16)
			r := bytes.NewReader(msg)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(msg)
				raw, release, err := s.readMessage(context.Background(), time.Time{}, r, 0, nil, "192.0.2.1", nil)
				release()
				if err != nil || len(raw) != size {
					b.Fatalf("read %d bytes, err %v; want %d", len(raw), err, size)
				}
			}
		})
	}
}
