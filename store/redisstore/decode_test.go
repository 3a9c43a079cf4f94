package redisstore

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/store"
)

// decodeFieldsJSON is decodeFields with encoding/json alone, as it was
// before the fast paths: the reference they must agree with.
func decodeFieldsJSON(s [6]string) (*record, error) {
	var r record
	if err := decodeJSON(s[0], &r.fixed); err != nil {
		return nil, err
	}
	r.Status = store.Status(s[1])
	if err := decodeJSON(s[2], &r.Subject); err != nil {
		return nil, err
	}
	if err := decodeJSON(s[3], &r.Notes); err != nil {
		return nil, err
	}
	if err := decodeJSON(s[4], &r.Labels); err != nil {
		return nil, err
	}
	ms, err := strconv.ParseInt(s[5], 10, 64)
	if err != nil {
		return nil, store.Wrap(store.Internal, err, "decode email")
	}
	r.UpdatedAt = ms
	return &r, nil
}

// sameDecoding checks that decodeFields and decodeFieldsJSON agree on s:
// both fail with Internal, or both return the same email.
func sameDecoding(t *testing.T, s [6]string) {
	t.Helper()
	v := make([]any, len(s))
	for i := range s {
		v[i] = s[i]
	}
	got, gotErr := decodeFields(v)
	want, wantErr := decodeFieldsJSON(s)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("fields %q: error %v, want %v", s, gotErr, wantErr)
	}
	if gotErr != nil {
		var e *store.Error
		if !errors.As(gotErr, &e) || e.Code != store.Internal {
			t.Fatalf("fields %q: error %v is not Internal", s, gotErr)
		}
		return
	}
	if !reflect.DeepEqual(got.email(), want.email()) || got.Body != want.Body {
		t.Fatalf("fields %q:\ngot  %+v\nwant %+v", s, got, want)
	}
}

var trickyStrings = []string{
	"", "plain", `quo"te`, `back\slash`, "\b\f\n\r\t", "\x00\x1f\x7f", "<&>", "ünïcödé 🎉",
	"\u2028\u2029", "bad \xff utf8", "\xed\xa0\x80", "null", "[]", ",", `","`, "]",
}

func randomText(r *rand.Rand) string {
	if r.IntN(2) == 0 {
		return trickyStrings[r.IntN(len(trickyStrings))]
	}
	var sb strings.Builder
	for range r.IntN(30) {
		switch r.IntN(4) {
		case 0:
			sb.WriteByte(byte(r.IntN(256)))
		case 1:
			sb.WriteRune(rune(r.IntN(0x3000)))
		default:
			sb.WriteByte(byte(0x20 + r.IntN(0x60)))
		}
	}
	return sb.String()
}

// TestFastDecodeMatchesEncodingJSON decodes records as the create and
// update scripts store them, and hand-made variants that only
// encoding/json reads (spaces, escapes, other key orders, numbers in other
// forms) or that it refuses, with both decoders.
func TestFastDecodeMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	opt := func() *string {
		if r.IntN(3) == 0 {
			return nil
		}
		return ptr(randomText(r))
	}
	for range 5000 {
		var labels []string
		for range r.IntN(4) {
			labels = append(labels, randomText(r))
		}
		e := &store.Email{
			AccountID: randomText(r), MessageID: opt(), Sender: randomText(r), Recipient: randomText(r),
			Subject: opt(), Status: store.Status(randomText(r)), Notes: opt(), Labels: labels,
			RawSize: r.Int64() - r.Int64(),
		}
		rec := newRecord(e, randomText(r), randomText(r))
		rec.ReceivedAt, rec.CreatedAt, rec.UpdatedAt = r.Int64()-r.Int64(), r.Int64N(1<<45), r.Int64N(1<<45)
		vals := rec.values()
		sameDecoding(t, [6]string(vals))
		// What the store writes takes the fast paths: a field added to
		// fixed but not to fastFixed fails here, not only in benchmarks.
		_, okFixed := fastFixed(vals[0])
		_, okSubject := fastOptString(vals[2])
		_, okNotes := fastOptString(vals[3])
		_, okLabels := fastStrings(vals[4])
		if !okFixed || !okSubject || !okNotes || !okLabels {
			t.Fatalf("stored fields %q: fast paths fixed %v, subject %v, notes %v, labels %v; want all", vals, okFixed, okSubject, okNotes, okLabels)
		}
	}
	good := `{"b":"b1","id":"i1","acc":"a1","mid":null,"from":"f@x","to":"t@x","size":12,"recv":1700000000000,"created":1700000000001}`
	for _, m := range []string{
		good,
		strings.Replace(good, `"mid":null`, `"mid":"<m@x>"`, 1),
		strings.Replace(good, `"size":12`, `"size":-0`, 1),
		strings.Replace(good, `"size":12`, `"size":012`, 1),
		strings.Replace(good, `"size":12`, `"size":1.0`, 1),
		strings.Replace(good, `"size":12`, `"size":1e3`, 1),
		strings.Replace(good, `"size":12`, `"size":-`, 1),
		strings.Replace(good, `"size":12`, `"size":99999999999999999999`, 1),
		strings.Replace(good, `"size":12`, `"size":"12"`, 1),
		strings.Replace(good, `"from":"f@x"`, `"from":"f\u0040x"`, 1),
		strings.Replace(good, `"from":"f@x"`, `"from" : "f@x"`, 1),
		strings.Replace(good, `"b":"b1","id":"i1"`, `"id":"i1","b":"b1"`, 1),
		strings.Replace(good, `"b":"b1"`, `"B":"b1"`, 1),
		strings.Replace(good, `"mid":null`, `"mid":nul`, 1),
		strings.Replace(good, `"mid":null`, `"mid":nullx`, 1),
		good + " ", good + "x", good[:len(good)-1], `{}`, `null`, ``, `"`, `{"b":"`,
		good[:40],
	} {
		sameDecoding(t, [6]string{m, "received", "null", "null", "[]", "1"})
	}
	for _, opt := range []string{`null`, `"s"`, `""`, `"a\"b"`, `"\u00e9"`, `"é"`, "\"\xff\"", `"x`, `x"`, `"`, ``, `nul`, `null `, ` null`, `"a""b"`, `1`, `[]`,
		`"\u003cm@x\u003e \u0026"`, `"\/\b\f\n\r\t\\\""`, `"\'"`, `"\x"`, `"\u12"`, `"\u12G4"`, `"\uD83D\uDE00"`, `"\ud83d"`,
		`"\udc00x"`, `"\u0000"`, `"\u00E9\u2028"`, `"\"`, `"a\"`, "\"\\\xff\"", "\"\\\n\""} {
		sameDecoding(t, [6]string{good, "received", opt, opt, "[]", "1"})
	}
	for _, labels := range []string{`null`, `[]`, `["a"]`, `["a","b"]`, `["a",]`, `[,]`, `["a" ,"b"]`, `[ ]`, `["a"`, `[`, `]`, `["a"]x`, `["\n"]`, `[null]`, `["a",null]`, `[1]`, `"a"`, ``, `{}`} {
		sameDecoding(t, [6]string{good, "received", "null", "null", labels, "1"})
	}
}

// FuzzDecodeFields compares the decoders on arbitrary field values.
func FuzzDecodeFields(f *testing.F) {
	f.Add(`{"b":"b1","id":"i1","acc":"a1","mid":null,"from":"f@x","to":"t@x","size":12,"recv":1,"created":2}`, `"subject"`, `["a","b"]`)
	f.Add(`{"b":"b1","id":"i1","acc":"a1","mid":"m","from":"f@x","to":"t@x","size":-1,"recv":1,"created":2}`, `null`, `[]`)
	f.Fuzz(func(t *testing.T, m, subject, labels string) {
		sameDecoding(t, [6]string{m, "received", subject, subject, labels, "1"})
	})
}
