// Package codes finds the one-time codes of an email (verification,
// sign-in and confirmation codes) in its subject, text part and HTML part.
// It is pure: no I/O, and any input, however broken, gives an answer.
//
// The rules (docs/api.md; the OpenAPI document, getEmailCodes):
//
//   - The subject, the text part and the HTML part (converted to text: one
//     line per block, table cells of a row on one line, script and style
//     left out) are read in that order, line by line.
//   - A code is a run of 4 to 8 digits; or 4 to 10 upper-case letters and
//     digits with at least one of each (but not a word then a number, the
//     shape of promotion codes: SAVE20, SPRING24); or groups split by single spaces or
//     dashes as people print codes to be read: 2 to 4 groups of 2 to 4
//     digits, all of one length and split alike, at most 8 digits in all
//     ("123 456", "12-34-56"), 4 to 8 single digits ("1 2 3 4 5 6",
//     one per table cell), or 2 to 3 groups of 3 to 5 upper-case letters and
//     digits ("ABC-DEF", "K7Q2-9XPM"). The value is the code as typed: the
//     groups joined without their spaces or dashes.
//   - It counts only when a keyword anchors it: a code word of one of many
//     languages ("code", "verify", "verification code", "OTP", "PIN", "Bestätigungscode",
//     "code de vérification", "código", "codice", "kod", "код", "コード",
//     "認証番号", "验证码", "인증번호" and more) before it on its line (the
//     first code after the keyword, within 60 characters), after it on its
//     line (the last code before the keyword, within 30 characters:
//     "123456 is your code"), or on one of the three lines above when the
//     code stands alone on its line. A code word qualified as something else
//     ("zip code", "código postal", "promo code", "Gutscheincode", "QR code")
//     is not a keyword.
//   - Look-alikes are left out: a number that is part of a date, a time, a
//     price, a decimal, a phone number or a path (next to / . , : - followed
//     or preceded by a digit, or after + # $ € £ ¥ @), a number followed by a
//     unit or currency (EUR, kr, %, 円, 年, ...), and a number just after an
//     order, invoice, tracking, phone or reference word.
//   - Each value is listed once, in the order found; at most MaxCodes of
//     them, and only the first MaxScan bytes of the subject and of each
//     part are read.
package codes

import (
	"context"
	"sort"
	"strings"
	"unicode"

	"github.com/mailsink/mailsink/internal/htmltext"
	"github.com/mailsink/mailsink/internal/runecut"
)

// MaxCodes bounds the codes Extract returns.
const MaxCodes = 20

// MaxScan is how many bytes of each part Extract reads: codes sit near the
// top of a message, and a huge part must cost a bounded time.
const MaxScan = 256 << 10

// Extract returns the one-time codes of an email with the given subject,
// text part and HTML part (any may be empty), at most MaxCodes of them. Its
// time is linear in the bytes it reads; it stops with ctx's error when ctx
// ends first.
func Extract(ctx context.Context, subject, textPart, htmlPart string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(v string) {
		if !seen[v] && len(out) < MaxCodes {
			seen[v] = true
			out = append(out, v)
		}
	}
	for _, part := range []string{clip(subject), clip(textPart), htmltext.Text(clip(htmlPart))} {
		for _, v := range fromText(ctx, part) {
			add(v)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// clip cuts s to at most MaxScan bytes, on a rune boundary.
func clip(s string) string { return runecut.Prefix(s, MaxScan) }

// fromText returns the anchored codes of a text, line by line, until ctx
// ends.
func fromText(ctx context.Context, text string) []string {
	var out []string
	// sinceKeyword counts the non-empty lines since the last line with a
	// keyword and no code of its own; -1 when there is none close enough.
	sinceKeyword := -1
	for line := range strings.SplitSeq(text, "\n") {
		if ctx.Err() != nil {
			return out
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		l := newLine(line)
		kws := l.keywords()
		cands := l.candidates()
		found := false
		for _, k := range kws {
			// The first code after the keyword, and the last one before it.
			i := sort.Search(len(cands), func(i int) bool { return cands[i].start >= k.end })
			if i < len(cands) && cands[i].start-k.end <= 60 {
				out = append(out, cands[i].value)
				found = true
			}
			j := sort.Search(len(cands), func(j int) bool { return cands[j].end > k.start }) - 1
			if j >= 0 && k.start-cands[j].end <= 30 {
				out = append(out, cands[j].value)
				found = true
			}
		}
		if len(kws) == 0 && sinceKeyword >= 0 && len(cands) == 1 && l.alone(cands[0]) {
			out = append(out, cands[0].value)
			found = true
		}
		switch {
		case len(kws) > 0 && !found:
			sinceKeyword = 0
		case sinceKeyword >= 0 && sinceKeyword < 2 && !found:
			sinceKeyword++
		default:
			sinceKeyword = -1
		}
	}
	return out
}

// line is one line of text as runes, with a lower-case copy for keyword
// matching. Positions are rune indexes.
type line struct {
	r     []rune
	lower []rune
}

func newLine(s string) *line {
	r := []rune(s)
	lower := make([]rune, len(r))
	for i, c := range r {
		lower[i] = unicode.ToLower(c)
	}
	return &line{r: r, lower: lower}
}

// span is a part of a line: a keyword or a code candidate with its value.
type span struct {
	start, end int
	value      string
}

// keyword is a code word. Word keywords need a word boundary on both
// sides ("pin" is not in "shipping"); the others may end a compound word
// ("Bestätigungscode", "verificatiecode") or take an ending ("kodu", "кода").
type keyword struct {
	text string
	word bool
}

var keywords = []keyword{
	{"code", false}, {"passcode", false}, {"otp", true}, {"pin", true}, {"tan", true}, {"2fa", true},
	{"one-time", false}, {"one time", false}, {"verif", false}, {"token", true},
	{"código", false}, {"codigo", false}, {"clave", true}, {"codice", false}, {"kod", false},
	{"kód", false}, {"kode", false}, {"koodi", false}, {"κωδικ", false}, {"код", false},
	{"コード", false}, {"認証番号", false}, {"確認番号", false}, {"ワンタイムパスワード", false},
	{"验证码", false}, {"驗證碼", false}, {"校验码", false}, {"动态码", false}, {"确认码", false},
	{"安全码", false}, {"动态密码", false}, {"코드", false}, {"인증번호", false}, {"인증 번호", false},
	{"رمز", false}, {"קוד", false}, {"कोड", false}, {"ओटीपी", false}, {"รหัส", false},
	{"mã xác", false}, {"mã otp", false},
}

// qualifiers make a code word mean something else when they are next to it
// (20 runes before it, 14 after).
var qualifiers = []string{
	"zip", "postcode", "post code", "postal", "posta ", "postale", "postleit", "postnummer", "pocztow",
	"promo", "discount", "coupon", "voucher", "gift", "gutschein", "rabatt", "aktions", "réduction",
	"reduc", "descuento", "desconto", "sconto", "rabat", "fiscal", "скидк", "промо", "индекс",
	"qr", "barcode", "bar code", "tracking", "sendung", "area code", "country code", "dialing",
	"product", "produkt", "artikel", "article", "swift", "bic", "sort code", "source", "html",
	"unicode", "decode", "encode", "referral", "优惠", "邮政", "郵便", "割引", "クーポン", "쿠폰",
	"할인", "우편", "tax", "steuer", "kodak",
}

// keywordRunes holds each keyword's text as runes, in the order of
// keywords.
var keywordRunes = func() [][]rune {
	out := make([][]rune, len(keywords))
	for i, k := range keywords {
		out[i] = []rune(k.text)
	}
	return out
}()

// keywords returns the unqualified code words of the line: those of the
// first keyword in order, then those of the second, and so on. It reads the
// line once, trying every keyword at each position: a pass per keyword over
// a long line would fall out of the processor's caches.
func (l *line) keywords() []span {
	found := make([][]span, len(keywords))
	next := make([]int, len(keywords)) // where each keyword may match next
	for i, c := range l.lower {
		for ki, kr := range keywordRunes {
			if kr[0] != c || i < next[ki] || i+len(kr) > len(l.lower) || !hasAt(l.lower, i, kr) {
				continue
			}
			end := i + len(kr)
			if keywords[ki].word && (i > 0 && isWordRune(l.lower[i-1]) || end < len(l.lower) && isWordRune(l.lower[end])) {
				continue
			}
			if l.qualified(i, end) {
				continue
			}
			found[ki] = append(found[ki], span{start: i, end: end})
			next[ki] = end
		}
	}
	var out []span
	for _, f := range found {
		out = append(out, f...)
	}
	return out
}

func hasAt(s []rune, i int, sub []rune) bool {
	for j, c := range sub {
		if s[i+j] != c {
			return false
		}
	}
	return true
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// qualified reports whether a qualifier sits next to the keyword at
// [start, end).
func (l *line) qualified(start, end int) bool {
	w := string(l.lower[max(start-20, 0):min(end+14, len(l.lower))])
	for _, q := range qualifiers {
		if strings.Contains(w, q) {
			return true
		}
	}
	return false
}

// group is a run of ASCII letters and digits in a line.
type group struct {
	start, end    int
	digits, upper int  // how many of each; others are lower-case letters
	promo         bool // four or more letters, then only digits: SAVE20, SPRING24
}

func (l *line) groups() []group {
	var out []group
	for i := 0; i < len(l.r); {
		if !isASCIIAlnum(l.r[i]) {
			i++
			continue
		}
		g := group{start: i}
		for ; i < len(l.r) && isASCIIAlnum(l.r[i]); i++ {
			switch c := l.r[i]; {
			case c >= '0' && c <= '9':
				g.digits++
			case c >= 'A' && c <= 'Z':
				g.upper++
			}
		}
		g.end = i
		word := strings.TrimRight(string(l.r[g.start:g.end]), "0123456789")
		g.promo = len(word) >= 4 && len(word) < g.len() && strings.Trim(word, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == ""
		out = append(out, g)
	}
	return out
}

func isASCIIAlnum(c rune) bool {
	return c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
}

func (g group) len() int        { return g.end - g.start }
func (g group) allDigits() bool { return g.digits == g.len() }
func (g group) codeChars() bool { return g.digits+g.upper == g.len() }

// candidates returns the code candidates of the line in order: for each
// group, the longest valid split code starting there, else the group on
// its own when it is a valid code.
func (l *line) candidates() []span {
	gs := l.groups()
	var out []span
	for i := 0; i < len(gs); {
		n := 1
		for j := min(i+7, len(gs)-1); j > i; j-- { // at most 8 groups
			if l.splitCode(gs[i : j+1]) {
				n = j - i + 1
				break
			}
		}
		g := gs[i : i+n]
		if (n > 1 || singleCode(g[0])) && l.clean(g[0].start, g[n-1].end) && !l.wholeSplit(gs, i, n) {
			var b strings.Builder
			for _, x := range g {
				b.WriteString(string(l.r[x.start:x.end]))
			}
			out = append(out, span{start: g[0].start, end: g[n-1].end, value: b.String()})
		}
		i += n
	}
	return out
}

// singleCode reports whether one group is a code: 4 to 8 digits, or 4 to
// 10 upper-case letters and digits with at least one of each.
func singleCode(g group) bool {
	if g.allDigits() {
		return g.len() >= 4 && g.len() <= 8
	}
	return g.codeChars() && g.digits > 0 && g.upper > 0 && g.len() >= 4 && g.len() <= 10 && !g.promo
}

// splitCode reports whether groups separated by single spaces or dashes
// make one split code.
func (l *line) splitCode(gs []group) bool {
	for k := 1; k < len(gs); k++ {
		if gs[k].start-gs[k-1].end != 1 || !isSplitter(l.r[gs[k-1].end]) {
			return false
		}
	}
	total, digits, ones := 0, true, true
	for _, g := range gs {
		total += g.len()
		digits = digits && g.allDigits()
		ones = ones && g.len() == 1
		if !g.codeChars() {
			return false
		}
	}
	switch {
	case digits && ones:
		return len(gs) >= 4 && len(gs) <= 8
	case digits:
		// Groups of one length with one kind of splitter: "123 456",
		// "12-34-56"; phone numbers mix them.
		for _, g := range gs {
			if g.len() < 2 || g.len() > 4 || g.len() != gs[0].len() {
				return false
			}
		}
		for k := 1; k < len(gs); k++ {
			if l.r[gs[k].start-1] != l.r[gs[0].end] {
				return false
			}
		}
		return len(gs) <= 4 && total <= 8 && !isDate(l, gs)
	default:
		for _, g := range gs {
			if g.len() < 3 || g.len() > 5 {
				return false
			}
		}
		return len(gs) <= 3
	}
}

// isSplitter: a space, a no-break space or a dash.
func isSplitter(c rune) bool {
	return c == ' ' || c == '\u00a0' || c == '-' || c == '\u2010' || c == '\u2011' || c == '\u2013'
}

// isDate reports whether digit groups read as a dash-separated date.
func isDate(l *line, gs []group) bool {
	if len(gs) != 3 || l.r[gs[0].end] != '-' {
		return false
	}
	for _, g := range []group{gs[0], gs[2]} {
		if g.len() == 4 && (l.r[g.start] == '1' || l.r[g.start] == '2') {
			return true
		}
	}
	return false
}

// wholeSplit reports whether the groups gs[i:i+n] are part of a longer run
// of code-like groups joined by splitters that is no code as a whole (a
// phone number such as 0800 123 456 789, an IBAN): then no part of it is a
// code. Words are no part of such a run, nor are letters next to digits.
func (l *line) wholeSplit(gs []group, i, n int) bool {
	digits := gs[i].allDigits()
	joins := func(a, b, neighbour group) bool {
		return b.start-a.end == 1 && isSplitter(l.r[a.end]) && neighbour.codeChars() &&
			neighbour.allDigits() == digits && (digits || neighbour.digits > 0)
	}
	return i > 0 && joins(gs[i-1], gs[i], gs[i-1]) || i+n < len(gs) && joins(gs[i+n-1], gs[i+n], gs[i+n])
}

// clean reports whether the candidate at [start, end) is free of the marks
// of a look-alike around it.
func (l *line) clean(start, end int) bool {
	r := l.r
	prev := func(k int) rune {
		if start-k >= 0 {
			return r[start-k]
		}
		return ' '
	}
	next := func(k int) rune {
		if end+k-1 < len(r) {
			return r[end+k-1]
		}
		return ' '
	}
	isDigit := func(c rune) bool { return c >= '0' && c <= '9' }
	if strings.ContainsRune("+#$€£¥@_\\/%&=", prev(1)) || attachedLetter(prev(1)) || isDigit(prev(1)) {
		return false
	}
	if strings.ContainsRune(".,/:-", prev(1)) && isDigit(prev(2)) {
		return false
	}
	if strings.ContainsRune("$€£¥%@_\\/&=", next(1)) || attachedLetter(next(1)) {
		return false
	}
	if strings.ContainsRune(".,/:-", next(1)) && isDigit(next(2)) {
		return false
	}
	if strings.ContainsRune("(", prev(1)) && strings.ContainsRune(")", next(1)) {
		return false // an area code
	}
	// A unit or currency after it.
	rest := strings.ToLower(strings.TrimLeft(string(r[end:min(end+6, len(r))]), " \u00a0"))
	for _, u := range units {
		if strings.HasPrefix(rest, u) {
			tail := []rune(rest[len(u):])
			if len(tail) == 0 || !unicode.IsLetter(tail[0]) || !isASCIIAlnum([]rune(u)[0]) {
				return false
			}
		}
	}
	// An order, invoice, phone or reference word just before it.
	// (only the words after the last number before it count: in "code
	// for order 55555 is 987654" the order word is 55555's).
	before := strings.ToLower(string(r[max(start-18, 0):start]))
	if i := strings.LastIndexFunc(before, unicode.IsDigit); i >= 0 {
		before = before[i:]
	}
	for _, w := range lookAlikeWords {
		if strings.Contains(before, w) {
			return false
		}
	}
	return true
}

// attachedLetter reports whether c, written right next to a number, makes
// it part of a word: letters of scripts that separate words with spaces do;
// Chinese, Japanese and Korean, written without spaces, do not.
func attachedLetter(c rune) bool {
	return unicode.IsLetter(c) && !unicode.In(c, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

var units = []string{
	"eur", "usd", "gbp", "chf", "jpy", "rub", "kr", "zł", "zl", "pln", "руб", "₽", "円", "元", "年", "月", "日",
	"号", "번", "원", "€", "$", "%", "kg", "km", "gb", "mb", "ms", "am", "pm", "uhr", "h ", "min", "sek", "sec",
	"m²", "cm",
}

var lookAlikeWords = []string{
	"order", "invoice", "bestell", "rechnung", "auftrag", "commande", "facture", "pedido", "factura",
	"fatura", "ordine", "fattura", "zamówieni", "faktur", "заказ", "счет", "счёт", "注文", "订单", "訂單",
	"주문", "tracking", "sendung", "suivi", "seguimiento", "tel", "phone", "fax", "téléphone", "teléfono",
	"telefon", "телефон", "電話", "电话", "ref", "kunden", "customer", "client", "account no",
	"no.", "nr.", "nº", "n°", "№", "注文番号", "会員番号", "電話番号", "お問い合わせ番号", "编号", "ticket", "booking", "buchung", "réservation",
	"reserva", "prenotazione", "iban", "bic", "plz", "zip", "cap ", "индекс", "〒",
}

// alone reports whether the candidate is all the line holds but
// punctuation and white space.
func (l *line) alone(c span) bool {
	rest := string(l.r[:c.start]) + string(l.r[c.end:])
	for _, ch := range rest {
		if unicode.IsLetter(ch) || unicode.IsDigit(ch) {
			return false
		}
	}
	return true
}
