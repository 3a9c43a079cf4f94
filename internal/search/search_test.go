package search

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/testenv/scaling"
	"github.com/mailsink/mailsink/store"
)

func TestParse(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		q    string
		want []Term
	}{
		{"", nil},
		{"   ", nil},
		{"from:Ada", []Term{{Kind: From, Text: "ada"}}},
		{`from:"Ada Lovelace" -to:bob`, []Term{{Kind: From, Text: "ada lovelace"}, {Kind: To, Text: "bob", Not: true}}},
		{"subject:Invoice label:VIP status:archived", []Term{{Kind: Subject, Text: "invoice"}, {Kind: Label, Text: "VIP"}, {Kind: Status, Status: store.StatusArchived}}},
		{"is:read -is:unread has:attachment", []Term{{Kind: Read}, {Kind: Unread, Not: true}, {Kind: HasAttachment}}},
		{"before:2026-11-27 after:2026-11-27", []Term{{Kind: Before, Time: day}, {Kind: After, Time: day.Add(24*time.Hour - time.Millisecond)}}},
		{"after:2026-11-27T10:00:00+01:00", []Term{{Kind: After, Time: time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)}}},
		{"larger:10KB smaller:2mb larger:500", []Term{{Kind: Larger, Size: 10 << 10}, {Kind: Smaller, Size: 2 << 20}, {Kind: Larger, Size: 500}}},
		{"message-id:<a@b.example>", []Term{{Kind: MessageID, Text: "a@b.example"}}},
		{`Grüße "your code" -spam`, []Term{{Kind: Words, Words: []string{"grüße"}}, {Kind: Words, Words: []string{"your", "code"}}, {Kind: Words, Words: []string{"spam"}, Not: true}}},
		{"http://a.example/x re:", []Term{{Kind: Words, Words: []string{"http", "a", "example", "x"}}, {Kind: Words, Words: []string{"re"}}}},
		{"FROM:x Subject:Y", []Term{{Kind: From, Text: "x"}, {Kind: Subject, Text: "y"}}},
		{`label:"two words" "a \"quoted\" word"`, []Term{{Kind: Label, Text: "two words"}, {Kind: Words, Words: []string{"a", "quoted", "word"}}}},
		{"--- !!! code", []Term{{Kind: Words, Words: []string{"code"}}}},
	}
	for _, tt := range tests {
		got, err := Parse(tt.q)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.q, err)
			continue
		}
		if fmt.Sprint(got.Terms) != fmt.Sprint(tt.want) {
			t.Errorf("Parse(%q) =\n%v, want\n%v", tt.q, got.Terms, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		q   string
		pos int
		say string
	}{
		{"status:new", 7, "is not a status"},
		{"is:flagged", 3, "is:read or is:unread"},
		{"has:stars", 4, "has:attachment"},
		{"before:yesterday", 7, "is not a day"},
		{"larger:big", 7, "is not a size"},
		{"from:", 5, "needs a value"},
		{`subject:"unclosed`, 8, "not closed"},
		{"a - b", 2, "must be followed"},
		{"a -\u00a0b", 2, "must be followed"},
		{strings.Repeat("x ", MaxTerms+1), 2 * MaxTerms, "at most"},
		{strings.Repeat("x", MaxQueryBytes+1), MaxQueryBytes, "longer than"},
		// Nothing left to search for: not a query that matches everything.
		{"--- !!!", 0, "no letters or digits"},
		{" -🎉", 1, "no letters or digits"},
		{`""`, 0, "no letters or digits"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.q)
		var pe *Error
		if !errors.As(err, &pe) || pe.Pos != tt.pos || !strings.Contains(pe.Msg, tt.say) {
			t.Errorf("Parse(%.30q) = %v; want an error at %d saying %q", tt.q, err, tt.pos, tt.say)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{`from:"a b" -to:c x`, "before:2026-01-01 larger:10KB", `"\"`, "-", "is:read has:attachment"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := Parse(s)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Pos < 0 || pe.Pos > len(s) {
				t.Fatalf("Parse(%q): %v is not an *Error within the query", s, err)
			}
			return
		}
		if len(q.Terms) > MaxTerms {
			t.Fatalf("Parse(%q): %d terms", s, len(q.Terms))
		}
		q.Match(&Doc{Subject: s, Sender: s}) // must not panic
	})
}

func TestMatch(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	doc := &Doc{Sender: "App@Shop.example", Recipient: "ada@acme.test", Subject: "Your Invoice 42", MessageID: "<m1@shop.example>",
		Labels: []string{"VIP"}, Status: store.StatusProcessed, RawSize: 2048, ReceivedAt: at,
		Digest: &Digest{FromNames: []string{"Shop Team"}, ToAddresses: []string{"Ada@Acme.test", "cc@acme.test"}, ToNames: []string{"Ada Lovelace"}, Attachments: 1}}
	body := strings.Fields("thanks for your order the code is 123456")
	doc.Body = func(words []string) bool { return HasPhrase(body, words) }
	tests := []struct {
		q    string
		want bool
	}{
		{"", true},
		{"from:shop", true}, {"from:TEAM", true}, {"from:ada", false},
		{"to:lovelace", true}, {"to:cc@", true}, {"to:bob", false},
		{"subject:invoice", true}, {"subject:receipt", false},
		{"label:VIP", true}, {"label:vip", false},
		{"status:processed", true}, {"status:received", false},
		{"is:unread", true}, {"is:read", false},
		{"has:attachment", true},
		{"before:2026-11-28 after:2026-11-26", true}, {"before:2026-11-27", false}, {"after:2026-11-27", false},
		{"after:2026-11-27T11:59:59Z", true},
		{"larger:2KB", false}, {"larger:2047", true}, {"smaller:3KB", true},
		{"message-id:m1@shop.example", true}, {"message-id:<M1@SHOP.EXAMPLE>", true}, {"message-id:m1", false},
		{"invoice", true}, {"42", true}, {"order", true}, {`"the code"`, true}, {`"code the"`, false}, {"lovelace", true},
		{"invoi", false}, {"-order", false}, {"-refund", true}, {"order -subject:invoice", false},
	}
	for _, tt := range tests {
		q, err := Parse(tt.q)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.q, err)
		}
		if got := q.Match(doc); got != tt.want {
			t.Errorf("%q matched %v, want %v", tt.q, got, tt.want)
		}
		packed := *doc
		packed.Digest, packed.packed = nil, pack(doc.Digest, nil)
		if got := q.Match(&packed); got != tt.want {
			t.Errorf("%q matched %v with the digest packed, want %v", tt.q, got, tt.want)
		}
		if got := q.cheapFirst().Match(doc); got != tt.want {
			t.Errorf("%q, cheapest terms first, matched %v, want %v", tt.q, got, tt.want)
		}
	}
	if got := mustParse(t, `order from:shop -label:x subject:inv is:unread`).cheapFirst(); got.Terms[0].Kind != Label ||
		got.Terms[1].Kind != Unread || got.Terms[2].Kind != From || got.Terms[3].Kind != Subject || got.Terms[4].Kind != Words {
		t.Errorf("cheapFirst's order: %+v", got.Terms)
	}
	// Before its body is read, only the envelope answers from: and to:.
	bare := *doc
	bare.Digest, bare.Body = nil, nil
	for q, want := range map[string]bool{"from:shop.example": true, "from:team": false, "to:ada@": true, "has:attachment": false, "order": false} {
		if got := mustParse(t, q).Match(&bare); got != want {
			t.Errorf("before the digest, %q matched %v, want %v", q, got, want)
		}
	}
}

func mustParse(t testing.TB, s string) Query {
	t.Helper()
	q, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestMakeDigest(t *testing.T) {
	t.Parallel()
	text := "Hello  Ada,\n\nyour code is 123456.\n" + strings.Repeat("filler words here ", 10000)
	html := "<p>ignored when there is text</p>"
	d := MakeDigest(Content{
		Headers: map[string]string{"from": `"Shop Team" <app@shop.example>`, "to": "Ada Lovelace <ada@acme.test>, bob@acme.test", "cc": "odd, <c@acme.test>"},
		Text:    &text, HTML: &html, Attachments: 2,
	})
	if !slices.Equal(d.FromAddresses, []string{"app@shop.example"}) || !slices.Equal(d.FromNames, []string{"Shop Team"}) {
		t.Errorf("from: %q %q", d.FromAddresses, d.FromNames)
	}
	if !slices.Contains(d.ToAddresses, "bob@acme.test") || !slices.Contains(d.ToAddresses, "c@acme.test") || !slices.Equal(d.ToNames, []string{"Ada Lovelace"}) {
		t.Errorf("to and cc: %q %q", d.ToAddresses, d.ToNames)
	}
	if !strings.HasPrefix(d.Snippet, "Hello Ada, your code is 123456. filler") || len([]rune(d.Snippet)) > SnippetRunes+1 {
		t.Errorf("snippet %q", d.Snippet)
	}
	if !strings.HasPrefix(d.Text, "hello ada your code is 123456 filler") || len(d.Text) > MaxTextBytes || strings.HasSuffix(d.Text, " ") {
		t.Errorf("text: %d bytes, starts %.60q", len(d.Text), d.Text)
	}
	if d.Attachments != 2 {
		t.Errorf("attachments %d", d.Attachments)
	}
	onlyHTML := "<style>p{}</style><p>Bonjour&nbsp;<b>Zoé</b></p>"
	if d := MakeDigest(Content{HTML: &onlyHTML}); d.Text != "bonjour zoé" || d.Snippet != "Bonjour Zoé" {
		t.Errorf("HTML only: text %q snippet %q", d.Text, d.Snippet)
	}
}

// testIndex is an index of n emails of account "a", email i received i
// minutes after a base, every third one with "needle" in its body, and
// the texts of their digests.
func testIndex(n int) (*Index, map[string]string, []string) {
	x := NewIndex()
	texts := map[string]string{}
	var ids []string
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		id := fmt.Sprintf("0190b6d2-7c3e-7a1b-8c2d-%012d", i)
		subject := fmt.Sprintf("email %d", i)
		e := &store.Email{ID: id, AccountID: "a", Sender: "s@x.example", Recipient: fmt.Sprintf("r%d@acme.test", i%10),
			Subject: &subject, Status: store.StatusReceived, Labels: []string{}, RawSize: int64(1000 + i), ReceivedAt: base.Add(time.Duration(i) * time.Minute)}
		x.Put(e)
		text := fmt.Sprintf("body of email %d hay hay", i)
		if i%3 == 0 {
			text += " needle"
		}
		text = strings.Join(Tokens(text), " ")
		texts[id] = text
		x.SetDigest("a", id, &Digest{Text: text})
		ids = append(ids, id)
	}
	return x, texts, ids
}

func textsOf(m map[string]string, reads *int) Texts {
	return func(_ context.Context, _ string, ids []string) (map[string]string, error) {
		*reads += len(ids)
		out := map[string]string{}
		for _, id := range ids {
			if t, ok := m[id]; ok {
				out[id] = t
			}
		}
		return out, nil
	}
}

func TestIndexSearch(t *testing.T) {
	t.Parallel()
	x, texts, ids := testIndex(300)
	reads := 0
	search := func(q string, f store.ListQuery) []string {
		t.Helper()
		f.AccountID = "a"
		if f.Limit == 0 {
			f.Limit = 100
		}
		got, err := x.Search(context.Background(), f, mustParse(t, q), textsOf(texts, &reads))
		if err != nil {
			t.Fatalf("Search(%q): %v", q, err)
		}
		return got
	}
	// Newest first, after the cursor and the offset.
	if got := search("", store.ListQuery{Limit: 3}); !slices.Equal(got, []string{ids[299], ids[298], ids[297]}) {
		t.Errorf("newest three: %v", got)
	}
	if got := search("", store.ListQuery{Limit: 2, Offset: 1, Before: ids[100]}); !slices.Equal(got, []string{ids[98], ids[97]}) {
		t.Errorf("after a cursor and an offset: %v", got)
	}
	// Metadata terms read no body.
	reads = 0
	if got := search("subject:\"email 1\" larger:1100", store.ListQuery{}); len(got) == 0 || reads != 0 {
		t.Errorf("subject and size: %d found, %d bodies read", len(got), reads)
	}
	// Body words: every third email, newest first, reading only the
	// bodies the filters cannot rule out.
	reads = 0
	got := search("needle", store.ListQuery{Limit: 10})
	var want []string
	for i := 299; i >= 0 && len(want) < 10; i-- {
		if i%3 == 0 {
			want = append(want, ids[i])
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("needle: %v, want %v", got, want)
	}
	if reads > 3*len(want)+batch {
		t.Errorf("needle read %d bodies for %d results", reads, len(want))
	}
	// The filters combine with the words.
	if got := search("needle", store.ListQuery{Recipient: "r3@acme.test"}); len(got) != 10 {
		t.Errorf("needle to r3: %d found, want 10 (3, 33, 63, ... of 300)", len(got))
	}
	if got := search("-needle hay", store.ListQuery{}); len(got) != 100 {
		t.Errorf("-needle: %d found, want 100 of the first page", len(got))
	}
	n, err := x.Count(context.Background(), store.ListQuery{AccountID: "a"}, mustParse(t, "needle"), textsOf(texts, &reads))
	if err != nil || n != 100 {
		t.Errorf("Count(needle) = %d, %v; want 100", n, err)
	}
	if _, err := x.Search(context.Background(), store.ListQuery{AccountID: "a", Limit: 1, Before: "0190b6d2-7c3e-7a1b-8c2d-999999999999"}, Query{}, textsOf(texts, &reads)); !store.IsCode(err, store.NotFound) {
		t.Errorf("an unknown cursor: %v, want NotFound", err)
	}
	// Updates and deletes show at once.
	e := &store.Email{ID: ids[299], AccountID: "a", Sender: "s@x.example", Recipient: "r9@acme.test", Labels: []string{"seen"}, Read: true,
		Status: store.StatusArchived, ReceivedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(299 * time.Minute)}
	x.Put(e)
	if got := search("is:read label:seen status:archived", store.ListQuery{}); !slices.Equal(got, []string{ids[299]}) {
		t.Errorf("after an update: %v", got)
	}
	if x.Digest("a", ids[299]) == nil {
		t.Error("an update lost the digest")
	}
	for _, id := range ids[:200] {
		x.Delete("a", id)
	}
	if got := search("", store.ListQuery{Limit: 100}); len(got) != 100 || got[99] != ids[200] {
		t.Errorf("after deleting 200: %d left, last %v", len(got), got[len(got)-1])
	}
	s := x.Stats("a")
	if s.Total != 100 || s.Unread != 99 || s.Statuses[store.StatusArchived] != 1 || s.Labels["seen"] != (LabelStats{1, 0}) {
		t.Errorf("stats %+v", s)
	}
}

// TestIndexScales: a query is linear in the account's emails.
func TestIndexScales(t *testing.T) {
	type built struct {
		x     *Index
		texts map[string]string
	}
	for _, q := range []string{"subject:nothing", "needle -hay", "from:nobody to:nobody"} {
		t.Run(q, func(t *testing.T) {
			query := mustParse(t, q)
			scaling.Linear(t, 500, func(n int) built {
				x, texts, _ := testIndex(n)
				return built{x, texts}
			}, func(b built) {
				reads := 0
				b.x.Count(context.Background(), store.ListQuery{AccountID: "a"}, query, textsOf(b.texts, &reads))
			})
		})
	}
}

// contains answers as lower-casing s and searching it would, for ASCII
// and other strings, upper and lower case, and empty ones.
func TestContains(t *testing.T) {
	alphabet := []string{"a", "B", "z", "Z", "@", ".", "1", "é", "É", "ß", "İ", "k", "K", "\u212a"}
	r := rand.New(rand.NewPCG(1, 2))
	word := func(max int) string {
		var b strings.Builder
		for range r.IntN(max + 1) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	cases := [][2]string{{"", ""}, {"Ada", ""}, {"", "a"}, {"Ada Lovelace", "lovelace"}, {"Ada Lovelace", "ada l"},
		{"NOREPLY@Shop.Example", "shop.example"}, {"Élodie", "élo"}, {"ab", "abc"}, {"\u212aelvin", "kelvin"}}
	for range 20000 {
		cases = append(cases, [2]string{word(8), strings.ToLower(word(3))})
	}
	for _, c := range cases {
		if got, want := contains(c[0], c[1]), strings.Contains(strings.ToLower(c[0]), c[1]); got != want {
			t.Errorf("contains(%q, %q) = %v, want %v", c[0], c[1], got, want)
		}
		// equalLower: the exact-address filters, as the stores compare.
		for _, lower := range []string{c[1], strings.ToLower(c[0]), store.NormalizeAddress(c[0] + c[1])} {
			if got, want := equalLower(c[0], lower), strings.ToLower(c[0]) == lower; got != want {
				t.Errorf("equalLower(%q, %q) = %v, want %v", c[0], lower, got, want)
			}
		}
	}
}

func BenchmarkContains(b *testing.B) {
	names := []string{"Ada Lovelace", "noreply@shop.example", "Grace Hopper", "notifications@github.example"}
	for b.Loop() {
		for _, s := range names {
			contains(s, "deliveries.example")
		}
	}
}

// TestKeptCounts: the counts kept as emails come, change and go answer
// Stats and the counts they can exactly as a walk over the emails does.
func TestKeptCounts(t *testing.T) {
	x := NewIndex()
	rnd := rand.New(rand.NewPCG(1, 2))
	statuses := []store.Status{store.StatusReceived, store.StatusProcessed, store.StatusArchived}
	labelSets := [][]string{{}, {"a"}, {"b"}, {"a", "b"}, {"a", "a"}, {"b", "c", "b"}}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ids []string
	email := func(id string, at time.Time) *store.Email {
		return &store.Email{ID: id, AccountID: "acct", Sender: "s@x.example", Recipient: "r@x.example",
			Status: statuses[rnd.IntN(len(statuses))], Labels: labelSets[rnd.IntN(len(labelSets))],
			Read: rnd.IntN(3) == 0, ReceivedAt: at}
	}
	var queries []string
	for _, q := range []string{"", "is:read", "is:unread", "status:archived", "label:a", "label:c", "label:none"} {
		queries = append(queries, q)
		if q != "" {
			queries = append(queries, "-"+q)
		}
	}
	for round := range 2000 {
		switch op := rnd.IntN(10); {
		case op < 5 || len(ids) == 0: // a new email
			id := fmt.Sprintf("id-%06d", round)
			x.Put(email(id, base.Add(time.Duration(round)*time.Second)))
			ids = append(ids, id)
		case op < 8: // an update: state, labels, read
			i := rnd.IntN(len(ids))
			x.Put(email(ids[i], base.Add(time.Duration(i)*time.Second)))
		case op < 9: // received again at another time
			x.Put(email(ids[rnd.IntN(len(ids))], base.Add(time.Duration(-round)*time.Second)))
		default:
			i := rnd.IntN(len(ids))
			x.Delete("acct", ids[i])
			ids = slices.Delete(ids, i, i+1)
		}
		if round%97 != 0 {
			continue
		}
		for _, f := range []store.ListQuery{{}, {Status: store.StatusArchived}, {Label: "a"}, {Label: "b"}} {
			f.AccountID = "acct"
			for _, qs := range queries {
				q := mustParse(t, qs)
				var walked int64
				if err := x.scan(context.Background(), f, q, nil, func(string) bool { walked++; return true }); err != nil {
					t.Fatal(err)
				}
				got, err := x.Count(context.Background(), f, q, nil)
				if err != nil || got != walked {
					t.Fatalf("round %d, %+v, q %q: Count %d, %v; a walk counts %d", round, f, qs, got, err, walked)
				}
			}
		}
		want := Stats{Statuses: map[store.Status]int64{}, Labels: map[string]LabelStats{}}
		a := x.accounts["acct"]
		for _, s := range a.order {
			if !a.recs[s].used {
				continue
			}
			d := a.doc(&a.recs[s], allDocFields)
			want.Total++
			if !d.Read {
				want.Unread++
			}
			want.Statuses[d.Status]++
			for i, l := range d.Labels {
				if !slices.Contains(d.Labels[:i], l) {
					ls := want.Labels[l]
					ls.Total++
					if !d.Read {
						ls.Unread++
					}
					want.Labels[l] = ls
				}
			}
		}
		if got := x.Stats("acct"); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: Stats %+v, want %+v", round, got, want)
		}
	}
}

// TestAddressesAndNamesComments: RFC 5322 comments, which net/mail does not
// read next to an addr-spec, are not part of a display name or an address
// (the address examples of RFC 5322, appendix A.5).
func TestAddressesAndNamesComments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		header           string
		wantAddrs, names []string
	}{
		{`Pete(A wonderful \) chap) <pete(his account)@silly.test(his host)>`, []string{"pete@silly.test"}, []string{"Pete"}},
		// Header values arrive unfolded.
		{"A Group(Some people) :Chris Jones <c@(Chris's host.)public.example>, joe@example.org, John <jdoe@one.test> (my dear friend); (the end of the group)",
			[]string{"c@public.example", "joe@example.org", "jdoe@one.test"}, []string{"Chris Jones", "John"}},
		{`"Shop (Team)" <app@shop.example>`, []string{"app@shop.example"}, []string{"Shop (Team)"}},
		// Quoted strings keep their parentheses and quoted pairs when the
		// comments around them go.
		{`"Shop (Team)" <app(x)@shop.example>`, []string{"app@shop.example"}, []string{"Shop (Team)"}},
		{`"a \" (b" <x(c)@y.example>`, []string{"x@y.example"}, []string{`a " (b`}},
		// A comment between words is a space.
		{"Mary(x)Smith <m(y)@a.example>", []string{"m@a.example"}, []string{"Mary Smith"}},
		// An unclosed one would swallow the rest: split at commas instead.
		{"A <a@x.example>, (Bob <b@y.example>", []string{"a@x.example", "b@y.example"}, []string{"A", "(Bob"}},
	}
	for _, tt := range tests {
		addrs, names := addressesAndNames(tt.header)
		if !slices.Equal(addrs, tt.wantAddrs) || !slices.Equal(names, tt.names) {
			t.Errorf("addressesAndNames(%q) = %q, %q; want %q, %q", tt.header, addrs, names, tt.wantAddrs, tt.names)
		}
	}
}

// FuzzAddressesAndNames: any header value is read without a panic, within
// the bounds, and withoutComments never adds more than it drops.
func FuzzAddressesAndNames(f *testing.F) {
	for _, seed := range []string{`Pete(A wonderful \) chap) <pete(his account)@silly.test(his host)>`, `"a \" (b" <x(c)@y.example>`,
		"A <a@x.example>, (Bob <b@y.example>", "((((", `"\`, "Mary(x)Smith <m(y)@a.example>", "g: a@b.example, c@d.example;"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		addrs, names := addressesAndNames(v)
		if len(addrs) > MaxAddresses || len(names) > MaxAddresses {
			t.Fatalf("%d addresses and %d names, more than %d", len(addrs), len(names), MaxAddresses)
		}
		if bare, _ := withoutComments(v); len(bare) > len(v) {
			t.Fatalf("withoutComments(%q) = %q, longer", v, bare)
		}
	})
}
