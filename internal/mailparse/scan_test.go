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

// checkScan checks that scanSummaryFields, where it reads a header block,
// reads what go-message reads (readHeader), and reports whether it read it.
func checkScan(t testing.TB, raw []byte) bool {
	t.Helper()
	hdr, _ := splitHeader(skipMboxLine(raw))
	got, ok := scanSummaryFields(hdr)
	if !ok {
		return false
	}
	h, _ := readHeader(hdr)
	if want := fieldsOf(h); !reflect.DeepEqual(got, want) {
		t.Errorf("scanSummaryFields(%q):\ngot  %+v\nwant %+v", hdr, got, want)
	}
	return true
}

func TestScanSummaryFields(t *testing.T) {
	// Headers as mail is sent: scanSummaryFields must read them (else
	// ParseHeader pays go-message's price on every message).
	for _, raw := range []string{
		string(benchPlain()),
		"From: Load Tool <sender@bench.test>\r\nTo: r1.run@bench.test\r\nSubject: bench run m1\r\nDate: Sun, 22 Nov 2026 12:00:00 +0000\r\nMessage-ID: <m1.run@bench.test>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nhello\r\n",
		"Subject: folded\n\tover\n  three lines \n\nbody\n",
		"From: a@example.com\r\nFrom: b@example.com\r\nTo: c@example.com,\r\n d@example.com\r\nCc: e@example.com\r\nSubject:\r\nSubject: second\r\nMessage-Id: \r\nMessage-Id: <x@y>\r\n\r\n",
		"X-Empty:\r\n:no name\r\nSUBJECT : upper\r\n \r\n\r\n",
		"From sender@example.com Mon Mar  9 10:00:00 2026\nSubject: mbox\n\n",
		"\r\nno header\r\n",
		"Subject: no body\r\n",
	} {
		if !checkScan(t, []byte(raw)) {
			t.Errorf("scanSummaryFields did not read %q", raw)
		}
	}
	// Headers it leaves to go-message.
	for _, raw := range []string{
		" Subject: starts folded\r\n\r\n",
		"Subject: no line end",
		"Subject: a lone \r in it\r\n\r\n",
		"Subject: ok\r\nnot a field\r\n\r\n",
		"Bad Name: x\r\n\r\n",
		"Name\x01: x\r\n\r\n",
	} {
		hdr, _ := splitHeader(skipMboxLine([]byte(raw)))
		if _, ok := scanSummaryFields(hdr); ok {
			t.Errorf("scanSummaryFields read %q", raw)
		}
	}
	for _, rel := range fixtures(t) {
		checkScan(t, readFixture(t, rel))
	}
}

// FuzzScanSummaryFields checks on arbitrary input that scanSummaryFields
// reads what go-message reads wherever it reads a header.
func FuzzScanSummaryFields(f *testing.F) {
	for _, rel := range fixtures(f) {
		f.Add(readFixture(f, rel))
	}
	f.Add(benchPlain())
	f.Add([]byte("Subject: a\r\n\tb\r\nsubject: c\r\nTo: x@y,\n z@w\n\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkScan(t, raw)
	})
}

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
