package mailparse

import (
	"reflect"
	"testing"
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
