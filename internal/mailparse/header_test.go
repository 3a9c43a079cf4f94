package mailparse

import (
	"bufio"
	"bytes"
	"net/mail"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message/textproto"
)

// FuzzParseDate: whatever the usual layout parses, net/mail's ParseDate
// parses to the same time, in the same zone, so that parseDate's first
// try answers as net/mail alone did.
func FuzzParseDate(f *testing.F) {
	for _, s := range []string{
		"Sat, 28 Nov 2026 16:30:00 +0000", "Mon, 2 Jan 2006 15:04:05 -0700", "Tue, 01 Jul 2003 10:52:37 +0200",
		"Fri, 21 Nov 1997 09:55:06 -0600 (MDT)", "Sun, 31 Dec 1899 23:59:60 +1400", "Wed, 9 Sep 2020 9:9:9 +0530",
		"Mon, 02 Jan 06 15:04:05 -0700", "Mon, 2 Jan 2006 15:04:05 GMT", " Mon, 2 Jan 2006 15:04:05 +0000",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		fast, err := time.Parse(usualDate, v)
		if err != nil {
			return
		}
		slow, err := mail.ParseDate(v)
		if err != nil {
			t.Fatalf("%q: the usual layout parses %v, net/mail fails: %v", v, fast, err)
		}
		if !fast.Equal(slow) || fast.String() != slow.String() {
			t.Fatalf("%q: the usual layout parses %v, net/mail %v", v, fast, slow)
		}
	})
}

// FuzzHeaderReader: go-message reads a header block through headerReader
// as it does through bufio's default reader.
func FuzzHeaderReader(f *testing.F) {
	f.Add([]byte("Subject: hi\r\nFrom: a@example.com\r\n\r\n"))
	f.Add([]byte("X-Long: " + strings.Repeat("y", 5000) + "\r\n folded\r\nTo: b@example.com\r\n\r\n"))
	f.Add([]byte("Bad line\r\n\tcont\r\nA:\r"))
	f.Fuzz(func(t *testing.T, hdr []byte) {
		a, errA := textproto.ReadHeader(headerReader(hdr))
		b, errB := textproto.ReadHeader(bufio.NewReader(bytes.NewReader(hdr)))
		if (errA == nil) != (errB == nil) || !reflect.DeepEqual(a, b) {
			t.Fatalf("%q: %v, %v; bufio's default reader: %v, %v", hdr, a, errA, b, errB)
		}
	})
}
