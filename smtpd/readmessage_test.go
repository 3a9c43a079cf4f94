package smtpd

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"testing/iotest"

	"github.com/mailsink/mailsink/internal/gate"
)

// readMessage returns the message whole whatever its size relative to
// largeMessage and whatever size the client announced, and takes a
// large-transfer slot exactly when the message is over largeMessage.
func TestReadMessage(t *testing.T) {
	turns := gate.New(1, 1)
	s := &Server{cfg: Config{LargeGate: turns}, ctx: context.Background()}
	for _, size := range []int{0, 1, 4095, largeMessage - 1, largeMessage, largeMessage + 1, 2*largeMessage + 3} {
		for _, hint := range []int64{0, int64(size), 10, 3 * largeMessage} {
			t.Run(fmt.Sprintf("size=%d/hint=%d", size, hint), func(t *testing.T) {
				msg := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
				raw, release, err := s.readMessage(context.Background(), iotest.HalfReader(bytes.NewReader(msg)), hint, nil, "192.0.2.1")
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
