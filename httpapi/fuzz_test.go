package httpapi

import (
	"net/url"
	"testing"
	"unicode/utf8"

	"github.com/mailsink/mailsink/store"
)

// FuzzListQuery checks that no query string makes the list validator panic,
// and that what it accepts is within the limits of the OpenAPI document.
func FuzzListQuery(f *testing.F) {
	for _, s := range []string{"", "limit=25&offset=0", "limit=101", "offset=-1", "recipient=a@b.io&sender=x@y.zz",
		"status=received", "subject=%00", "wait=60&since=2026-01-01T00:00:00Z", "limit=9999999999999999999999", "a=%zz",
		"label=signup&before=0190b6d2-7c3e-7a1b-8c2d-1234567890ab", "label=", "before=x&wait=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		v := newValidationError()
		lq, wait := parseListQuery(q, v)
		if !v.empty() {
			return
		}
		if lq.Limit < 1 || lq.Limit > maxListLimit || lq.Offset < 0 || lq.Offset > maxOffset || wait < 0 || wait.Seconds() > maxWait {
			t.Fatalf("accepted out-of-range query %q: %+v wait %v", raw, lq, wait)
		}
		if n := utf8.RuneCountInString(lq.Label); q.Has("label") && (n < 1 || n > maxLabelLength) {
			t.Fatalf("accepted label %q", lq.Label)
		}
		if q.Has("before") && (!store.ValidID(lq.Before) || lq.Before != store.NormalizeID(lq.Before) || wait != 0) {
			t.Fatalf("accepted before %q with wait %v", lq.Before, wait)
		}
	})
}

// FuzzRequestBody checks that no body makes the create and update
// validators panic.
func FuzzRequestBody(f *testing.F) {
	for _, s := range []string{"", "{}", "null", "[]", `{"recipient":"r@acme.test","sender":"s@example.com"}`,
		`{"labels":["a"],"notes":null,"status":"processed","subject":"x"}`, `{"headers":{"a":"b"},"receivedAt":"2026-01-01T00:00:00Z"}`,
		`{"labels":[1,{}],"headers":[]}`, `{"a":` + "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[" + `}`, "\xff\xfe"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		v := newValidationError()
		obj, ok := parseObject(body, v)
		if !ok {
			if v.empty() {
				t.Fatalf("refused %q without saying why", body)
			}
			return
		}
		obj.address("recipient")
		obj.address("sender")
		obj.str("subject", false, true, maxSubject)
		obj.str("raw", false, false, 0)
		obj.headers("headers")
		obj.time("receivedAt")
		obj.labels("labels")
		obj.str("notes", false, true, maxNotes)
	})
}

// BenchmarkParseListQuery measures the validation of a list request's
// query, as the automation pattern's polling sends it.
func BenchmarkParseListQuery(b *testing.B) {
	q, err := url.ParseQuery("recipient=new-user%40example.com&status=received&limit=25&wait=30&since=2026-11-22T12:00:00.000Z")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		v := newValidationError()
		if parseListQuery(q, v); !v.empty() {
			b.Fatal("query refused")
		}
	}
}
