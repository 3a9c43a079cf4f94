package loadgen

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"mime/quotedprintable"
	"strings"
	"time"
)

// Corpus builds the varied messages of the search benchmark: each message
// i is made from a generator seeded with i, so the same run sends the same
// bytes, and the benchmark knows which rare words each message holds.
type Corpus struct {
	// Run is the run's token, in every Message-ID.
	Run    string
	common []string // the frequent body words, by rank
	rare   []string // words each in about RareShare*n/len(rare) messages
}

// Shares of the corpus's messages.
const (
	// AttachmentShare of the messages carry a base64 attachment.
	AttachmentShare = 0.10
	// RareShare of the messages carry one of the rare words.
	RareShare = 0.02
	// corpusRecipients is how many recipients the messages go to.
	corpusRecipients = 500
	commonWords      = 400
	rareWords        = 1000
)

var (
	firstNames = []string{"Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Margaret", "Ken", "Dennis", "Frances",
		"John", "Radia", "Linus", "Sophie", "Tim", "Hedy", "Claude", "Katherine", "Niklaus", "Leslie",
		"Jean", "Annie", "Bjarne", "Guido", "Lynn", "Robin", "Carol", "Ivan", "Shafi", "Whitfield"}
	lastNames = []string{"Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Hamilton", "Thompson", "Ritchie",
		"Allen", "McCarthy", "Perlman", "Torvalds", "Wilson", "Berners", "Lamarr", "Shannon", "Johnson", "Wirth",
		"Lamport", "Sammet", "Easley", "Stroustrup", "Rossum", "Conway", "Milner", "Shaw", "Sutherland", "Goldwasser", "Diffie"}
	senderDomains = []string{"shop.example", "billing.example", "github.example", "bank.example", "travel.example",
		"news.example", "calendar.example", "support.example", "social.example", "school.example", "health.example",
		"cloud.example", "jobs.example", "forum.example", "deliveries.example"}
	senderLocals = []string{"noreply", "no-reply", "notifications", "info", "hello", "team", "alerts", "support", "billing", "news"}
	// subjects have at most one verb: a number or a common word.
	subjects = []string{
		"Your order #%d has shipped", "Invoice %d for your subscription", "Reset your password", "Confirm your account",
		"Weekly digest: %s and more", "Re: %s", "Meeting notes: %s", "Your receipt from %s", "Security alert for your account",
		"Welcome to %s", "Reminder: %s tomorrow", "[%s] build failed", "Your statement is ready", "Fwd: %s",
		"New comment on %s", "Delivery scheduled for order #%d", "Verify your email address", "Payment received, thank you",
	}
)

// NewCorpus returns the corpus of a run.
func NewCorpus(run string) *Corpus {
	v := vocabulary()
	return &Corpus{Run: run, common: v[:commonWords], rare: v[commonWords : commonWords+rareWords]}
}

// CommonWord returns the body word of rank k (0 is the most frequent).
func (c *Corpus) CommonWord(k int) string { return c.common[k] }

// RareWord returns rare word k.
func (c *Corpus) RareWord(k int) string { return c.rare[k%len(c.rare)] }

// Recipient returns the address of recipient k.
func (c *Corpus) Recipient(k int) string { return fmt.Sprintf("user%d@bench.test", k%corpusRecipients) }

// CorpusMessage is message i of a corpus and what the benchmark knows of
// it.
type CorpusMessage struct {
	From, To string // envelope
	Raw      []byte
	// Rare is the index of its rare word, or -1.
	Rare int
	// Attachment says whether it carries one.
	Attachment bool
}

// Message builds message i; extra, when not empty, is added to its body
// as a paragraph of its own (the lag test's unique words).
func (c *Corpus) Message(i int, extra string) CorpusMessage {
	r := rand.New(rand.NewPCG(uint64(i), 0x5ea4c4))
	zipf := rand.NewZipf(r, 1.1, 2, uint64(len(c.common)-1))
	first, last := firstNames[r.IntN(len(firstNames))], lastNames[r.IntN(len(lastNames))]
	domain := senderDomains[r.IntN(len(senderDomains))]
	from := senderLocals[r.IntN(len(senderLocals))] + "@" + domain
	m := CorpusMessage{From: from, To: c.Recipient(r.IntN(corpusRecipients)), Rare: -1}
	subject := subjects[r.IntN(len(subjects))]
	switch {
	case strings.Contains(subject, "%d"):
		subject = fmt.Sprintf(subject, 1000+r.IntN(90000))
	case strings.Contains(subject, "%s"):
		subject = fmt.Sprintf(subject, c.common[zipf.Uint64()])
	}

	// The body: paragraphs of sentences of Zipf-drawn words.
	var text strings.Builder
	words := 40 + r.IntN(260)
	if r.Float64() < RareShare {
		m.Rare = r.IntN(len(c.rare))
	}
	rareAt := r.IntN(words)
	for w := 0; w < words; w++ {
		word := c.common[zipf.Uint64()]
		if w == rareAt && m.Rare >= 0 {
			word = c.rare[m.Rare]
		}
		switch {
		case w%12 == 0 && w > 0:
			text.WriteString(".\r\n\r\n")
			word = strings.ToUpper(word[:1]) + word[1:]
		case w > 0:
			text.WriteByte(' ')
		}
		text.WriteString(word)
	}
	text.WriteString(".\r\n")
	if extra != "" {
		text.WriteString("\r\n" + extra + "\r\n")
	}
	text.WriteString("\r\n-- \r\n" + first + " " + last + "\r\n")

	var b bytes.Buffer
	fmt.Fprintf(&b, "From: %s %s <%s>\r\n", first, last, from)
	fmt.Fprintf(&b, "To: %s\r\n", m.To)
	fmt.Fprintf(&b, "Subject: %s\r\n", subject)
	fmt.Fprintf(&b, "Date: %s\r\n", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i)*time.Minute).Format(time.RFC1123Z))
	fmt.Fprintf(&b, "Message-ID: <c%d.%s@%s>\r\n", i, c.Run, domain)
	b.WriteString("MIME-Version: 1.0\r\n")
	m.Attachment = r.Float64() < AttachmentShare
	body := encodeText(r, text.String())
	if !m.Attachment {
		b.Write(body)
	} else {
		const boundary = "corpus-boundary-51c0"
		b.WriteString("Content-Type: multipart/mixed; boundary=\"" + boundary + "\"\r\n\r\n--" + boundary + "\r\n")
		b.Write(body)
		b.WriteString("\r\n--" + boundary + "\r\nContent-Type: application/pdf\r\n" +
			"Content-Disposition: attachment; filename=\"document.pdf\"\r\nContent-Transfer-Encoding: base64\r\n\r\n")
		raw := make([]byte, 1024+r.IntN(16<<10))
		for k := range raw {
			raw[k] = byte(r.Uint32())
		}
		enc := base64.StdEncoding.EncodeToString(raw)
		for k := 0; k < len(enc); k += 76 {
			b.WriteString(enc[k:min(k+76, len(enc))] + "\r\n")
		}
		b.WriteString("--" + boundary + "--\r\n")
	}
	m.Raw = b.Bytes()
	return m
}

// encodeText returns a text/plain part's headers and body: 70% as they
// are, 15% quoted-printable, 15% base64.
func encodeText(r *rand.Rand, text string) []byte {
	var b bytes.Buffer
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\n")
	switch p := r.Float64(); {
	case p < 0.70:
		b.WriteString("\r\n" + text)
	case p < 0.85:
		b.WriteString("Content-Transfer-Encoding: quoted-printable\r\n\r\n")
		w := quotedprintable.NewWriter(&b)
		w.Write([]byte(text))
		w.Close()
		b.WriteString("\r\n")
	default:
		b.WriteString("Content-Transfer-Encoding: base64\r\n\r\n")
		enc := base64.StdEncoding.EncodeToString([]byte(text))
		for k := 0; k < len(enc); k += 76 {
			b.WriteString(enc[k:min(k+76, len(enc))] + "\r\n")
		}
	}
	return b.Bytes()
}
