package smtpd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"testing/iotest"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/mailsink/mailsink/internal/gate"
)

// budgetServer returns a server whose messages take room in budget, with
// the read timeout idle (the most a message waits for room).
func budgetServer(budget *gate.Budget, idle time.Duration) *Server {
	return New(Config{Buffers: budget, LargeGate: gate.New(1, 1), ReadTimeout: idle}, nil, nil, slog.New(slog.DiscardHandler))
}

// firstPartRoom is the room a message that does not end in its first chunk
// takes: its first chunk, then the rest of its first largeMessage+1 bytes.
const firstPartRoom = (largeMessage/chunkSize + 1) * chunkSize

// Whatever its size and announced size, a message holds room for what it
// was read into until it is released: its first chunk or its announced
// size while small, its whole first part when it goes on, and its own size
// once read when that is less than half of what it held.
func TestReadMessageHoldsRoomForItsBuffers(t *testing.T) {
	budget := gate.NewBudget(64<<20, 8<<20)
	s := budgetServer(budget, time.Minute)
	for _, tt := range []struct {
		size, hint int
		want       int64 // room held once read
	}{
		{0, 0, 1},
		{2000, 0, 2000},
		{chunkSize / 2, 0, chunkSize / 2},
		{chunkSize/2 + 1, 0, chunkSize},
		{chunkSize, 0, chunkSize},
		{chunkSize + 1, 0, chunkSize + 1},
		{100_000, 0, 100_000},
		{100_000, 100_000, 100_001},
		{100_000, 10, 100_000}, // more than announced
		{firstPartRoom / 2, 0, firstPartRoom / 2},
		{firstPartRoom/2 + 1, 0, firstPartRoom},
		{largeMessage + 1, 0, firstPartRoom},
		{3 * largeMessage, 0, firstPartRoom},
		{3 * largeMessage, 3 * largeMessage, firstPartRoom},
	} {
		t.Run(fmt.Sprintf("size=%d/hint=%d", tt.size, tt.hint), func(t *testing.T) {
			msg := randomMessage(uint64(tt.size), tt.size)
			raw, release, err := s.readMessage(context.Background(), time.Time{}, iotest.HalfReader(bytes.NewReader(msg)), int64(tt.hint), nil, "192.0.2.1", []string{"192.0.2.1"})
			if err != nil || !bytes.Equal(raw, msg) {
				t.Fatalf("read %d bytes, err %v; want the %d sent", len(raw), err, len(msg))
			}
			if got := budget.Used(); got != tt.want {
				t.Errorf("room held %d, want %d", got, tt.want)
			}
			release()
			release()
			if got := budget.Used(); got != 0 {
				t.Errorf("room held %d after release, want 0", got)
			}
		})
	}
}

// A session takes room before it reads into a buffer: while it waits for
// the client in its first chunk, it holds the chunk; in the rest of its
// first part, all of it.
func TestReadMessageTakesRoomBeforeReading(t *testing.T) {
	budget := gate.NewBudget(64<<20, 8<<20)
	s := budgetServer(budget, time.Minute)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, release, err := s.readMessage(context.Background(), time.Time{}, pr, 0, nil, "192.0.2.1", []string{"192.0.2.1"})
		release()
		done <- err
	}()
	for _, step := range []struct {
		send int
		want int64
	}{
		{100, chunkSize},
		{chunkSize, firstPartRoom},
	} {
		pw.Write(bytes.Repeat([]byte("x"), step.send))
		deadline := time.Now().Add(10 * time.Second)
		for budget.Used() != step.want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := budget.Used(); got != step.want {
			t.Fatalf("after %d bytes more: room held %d, want %d", step.send, got, step.want)
		}
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := budget.Used(); got != 0 {
		t.Errorf("room held %d after release, want 0", got)
	}
}

// A message that finds no room waits without reading, and gives up: after
// the read timeout with errBusy (go-smtp then drops the rest and the session
// goes on), at the transfer's deadline, when its transaction ends, or when
// the server starts draining. Another client address still gets room.
func TestReadMessageWaitsForRoom(t *testing.T) {
	const share = 2 * firstPartRoom
	budget := gate.NewBudget(3*share, share)
	hog, err := budget.Acquire(context.Background(), share, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	defer hog()
	read := func(s *Server, tx context.Context, deadline time.Time, client string) (time.Duration, int, error) {
		msg := bytes.NewReader(bytes.Repeat([]byte("x"), 1000))
		start := time.Now()
		_, release, err := s.readMessage(tx, deadline, msg, 0, nil, client, []string{client})
		release()
		return time.Since(start), 1000 - msg.Len(), err
	}
	s := budgetServer(budget, 100*time.Millisecond)
	for _, tt := range []struct {
		name     string
		tx       func() context.Context
		deadline time.Duration
		want     error
		atLeast  time.Duration
	}{
		{"no room within the read timeout", context.Background, 0, errBusy, 100 * time.Millisecond},
		{"the transfer's deadline first", context.Background, 50 * time.Millisecond, context.DeadlineExceeded, 50 * time.Millisecond},
		{"the transaction ends", func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			return ctx
		}, 0, smtp.ErrDataReset, 20 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// The wait is timed from before the deadline and the
			// transaction's timer start, so that the time it takes to
			// get to the read does not count against it.
			began := time.Now()
			var deadline time.Time
			if tt.deadline > 0 {
				deadline = began.Add(tt.deadline)
			}
			_, n, err := read(s, tt.tx(), deadline, "192.0.2.1")
			waited := time.Since(began)
			if err != tt.want {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
			if waited < tt.atLeast || waited > 5*time.Second {
				t.Errorf("gave up after %v, want about %v", waited, tt.atLeast)
			}
			if n != 0 {
				t.Errorf("read %d bytes while waiting for room, want none", n)
			}
		})
	}
	if _, _, err := read(s, context.Background(), time.Time{}, "192.0.2.2"); err != nil {
		t.Errorf("another address: %v, want room", err)
	}
	draining := budgetServer(budget, time.Minute)
	time.AfterFunc(20*time.Millisecond, draining.conns.drain)
	if _, _, err := read(draining, context.Background(), time.Time{}, "192.0.2.1"); err != errShuttingDown {
		t.Errorf("draining: %v, want errShuttingDown", err)
	}
	if got := budget.Used(); got != share {
		t.Errorf("room held %d after the waits, want the hog's %d", got, share)
	}
}
