package search

import (
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mailsink/mailsink/store"
)

// An account's emails are kept as records without pointers: their strings
// in a few large chunks (text), their ids as the 16 bytes of a UUID, their
// label sets and digests shared and counted. The garbage collector marks
// every pointer of the live heap on each cycle; with a struct of strings,
// slices and pointers per email, the index of a million emails was most of
// the CPU of a server under ingest (BenchmarkIndexMemory has the figures).

// accountIndex is the emails of one account.
type accountIndex struct {
	recs []record // by slot; the free slots are in free
	free []uint32
	// order is the slots by ReceivedAt, then ID, ascending. A removed
	// email's slot stays in it as a ghost that keeps the email's time and
	// id (used false) until order is compacted, so that a binary search
	// never steps over removed entries: walking runs of them made deleting
	// a block of 100,000 emails of a 400,000-email account take 12 s.
	order  []uint32
	ghosts int // ghosts in order
	byID   map[uuidKey]uint32
	// oddIDs holds the ids that are not lower-case UUIDs (none that
	// mailsink makes): a record's key is then its index in odd.
	oddIDs map[string]uint32
	odd    []string

	text    text
	labels  labelSets
	digests digestSlots
	// stale counts the records removed and the strings replaced since
	// text was last compacted: what it holds that no record reads.
	stale int
	// counts is Stats of the live entries, kept as they come, change and
	// go, so that the stats and the counts of the sidebar (is:unread, a
	// label, a status) cost the same at a million emails as at ten.
	counts Stats
}

// record is one email: no field holds a pointer.
type record struct {
	received                                      int64 // ReceivedAt, Unix milliseconds (the store's precision)
	rawSize                                       int64
	key                                           uuidKey
	oddID                                         bool // key is an index in odd
	read                                          bool
	used                                          bool // false in a free slot or a ghost
	sender, recipient, subject, messageID, status span
	labels                                        uint32 // in labels; 0: none
	digest                                        uint32 // in digests; 0: none yet
}

// uuidKey is a lower-case UUID's 16 bytes: they order as its text does.
type uuidKey [16]byte

// parseUUID reads a lower-case UUID in its usual form.
func parseUUID(id string) (k uuidKey, ok bool) {
	if len(id) != 36 || id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' {
		return k, false
	}
	var hexa [32]byte
	n := 0
	for i := 0; i < 36; i++ {
		c := id[i]
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			continue
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f':
			hexa[n] = c
			n++
		default:
			return k, false
		}
	}
	_, err := hex.Decode(k[:], hexa[:])
	return k, err == nil
}

func (k uuidKey) String() string {
	var b [36]byte
	hex.Encode(b[0:8], k[0:4])
	hex.Encode(b[9:13], k[4:6])
	hex.Encode(b[14:18], k[6:8])
	hex.Encode(b[19:23], k[8:10])
	hex.Encode(b[24:], k[10:])
	b[8], b[13], b[18], b[23] = '-', '-', '-', '-'
	return string(b[:])
}

func newAccountIndex() *accountIndex {
	return &accountIndex{byID: map[uuidKey]uint32{}, oddIDs: map[string]uint32{},
		labels: newLabelSets(), digests: digestSlots{slots: make([]digestSlot, 1)}}
}

// slot returns the slot of the email id.
func (a *accountIndex) slot(id string) (uint32, bool) {
	if k, ok := parseUUID(id); ok {
		s, ok := a.byID[k]
		return s, ok
	}
	s, ok := a.oddIDs[id]
	return s, ok
}

// id returns the id of the email in slot s.
func (a *accountIndex) id(r *record) string {
	if r.oddID {
		return a.odd[oddIndex(r.key)]
	}
	return r.key.String()
}

func oddIndex(k uuidKey) int { return int(k[0]) | int(k[1])<<8 | int(k[2])<<16 | int(k[3])<<24 }

// len is how many emails the account holds.
func (a *accountIndex) len() int { return len(a.byID) + len(a.oddIDs) }

// recordOf makes e's record, keeping its digest (0: none); its strings
// are added to text, and it counts for its label set.
func (a *accountIndex) recordOf(e *store.Email, digest uint32) record {
	r := record{received: e.ReceivedAt.UnixMilli(), rawSize: e.RawSize, read: e.Read, used: true, digest: digest,
		sender: a.text.add(e.Sender), recipient: a.text.add(e.Recipient), status: a.text.add(string(e.Status)),
		labels: a.labels.add(e.Labels)}
	if e.Subject != nil {
		r.subject = a.text.add(*e.Subject)
	}
	if e.MessageID != nil {
		r.messageID = a.text.add(*e.MessageID)
	}
	if k, ok := parseUUID(e.ID); ok {
		r.key = k
	} else {
		r.oddID = true
		i := len(a.odd)
		a.odd = append(a.odd, e.ID)
		r.key = uuidKey{byte(i), byte(i >> 8), byte(i >> 16), byte(i >> 24)}
	}
	return r
}

// update gives the record in slot s e's fields, keeping its id, time and
// digest.
func (a *accountIndex) update(s uint32, e *store.Email) {
	r := &a.recs[s]
	a.count(r, -1)
	a.labels.drop(r.labels)
	r.rawSize, r.read, r.labels = e.RawSize, e.Read, a.labels.add(e.Labels)
	was := [...]span{r.sender, r.recipient, r.status, r.subject, r.messageID}
	r.sender = a.text.keep(r.sender, e.Sender)
	r.recipient = a.text.keep(r.recipient, e.Recipient)
	r.status = a.text.keep(r.status, string(e.Status))
	r.subject = a.text.keep(r.subject, deref(e.Subject))
	r.messageID = a.text.keep(r.messageID, deref(e.MessageID))
	a.count(r, 1)
	for i, sp := range [...]span{r.sender, r.recipient, r.status, r.subject, r.messageID} {
		if sp != was[i] {
			a.stale++
		}
	}
	a.compactIfStale()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// add puts r in a free slot and indexes it by id; it does not place it in
// order.
func (a *accountIndex) add(r record) uint32 {
	s := put(&a.recs, &a.free, r)
	if r.oddID {
		a.oddIDs[a.odd[oddIndex(r.key)]] = s
	} else {
		a.byID[r.key] = s
	}
	a.count(&a.recs[s], 1)
	return s
}

// forget takes the email in slot s out of the ids, the counts and the
// shared sets, leaving its time and id: a ghost, or a slot to free.
func (a *accountIndex) forget(s uint32) {
	r := &a.recs[s]
	a.count(r, -1)
	if r.oddID {
		delete(a.oddIDs, a.odd[oddIndex(r.key)])
	} else {
		delete(a.byID, r.key)
	}
	a.labels.drop(r.labels)
	a.digests.drop(r.digest)
	*r = record{received: r.received, key: r.key, oddID: r.oddID}
	a.stale++
}

// keepDigest returns the digest of the email in slot s, counted once more
// for the record of the same email that replaces it.
func (a *accountIndex) keepDigest(s uint32) uint32 {
	d := a.recs[s].digest
	a.digests.keep(d)
	return d
}

// freeSlot makes slot s, not in order, free.
func (a *accountIndex) freeSlot(s uint32) {
	a.recs[s] = record{}
	a.free = append(a.free, s)
}

// release frees slot s, which is not in order.
func (a *accountIndex) release(s uint32) {
	a.forget(s)
	a.freeSlot(s)
	a.compactIfStale()
}

// remove takes the email in slot s out of the account; its entry in
// order stays as a ghost.
func (a *accountIndex) remove(s uint32) {
	a.forget(s)
	a.ghosts++
	// Ghosts at either end are cut off at once (retention removes the
	// oldest emails one by one), the others once they are a quarter of
	// order.
	for len(a.order) > 0 && !a.recs[a.order[0]].used {
		a.freeSlot(a.order[0])
		a.order, a.ghosts = a.order[1:], a.ghosts-1
	}
	for n := len(a.order); n > 0 && !a.recs[a.order[n-1]].used; n-- {
		a.freeSlot(a.order[n-1])
		a.order, a.ghosts = a.order[:n-1], a.ghosts-1
	}
	if a.ghosts > 64 && a.ghosts > len(a.order)/4 {
		a.dropGhosts()
	}
	a.compactIfStale()
}

// dropGhosts takes the ghosts out of order and frees their slots.
func (a *accountIndex) dropGhosts() {
	a.order = slices.DeleteFunc(a.order, func(s uint32) bool {
		if a.recs[s].used {
			return false
		}
		a.freeSlot(s)
		return true
	})
	a.ghosts = 0
}

// orderKey is what orders an email: its time, then its id.
type orderKey struct {
	received int64
	key      uuidKey
	// oddID says the id is odd, not a UUID (key is then unused): "" is an
	// odd id too, so odd cannot say it alone.
	oddID bool
	odd   string
}

func (a *accountIndex) keyOf(r *record) orderKey {
	k := orderKey{received: r.received, key: r.key, oddID: r.oddID}
	if r.oddID {
		k.odd = a.odd[oddIndex(r.key)]
	}
	return k
}

// compare orders a record against k, by time, then id.
func (a *accountIndex) compare(r *record, k orderKey) int {
	if r.received != k.received {
		if r.received < k.received {
			return -1
		}
		return 1
	}
	switch {
	case !r.oddID && !k.oddID:
		return slices.Compare(r.key[:], k.key[:])
	case !k.oddID:
		return strings.Compare(a.id(r), k.key.String())
	}
	return strings.Compare(a.id(r), k.odd)
}

// insertAt returns where an email ordered by k goes in order: after every
// entry ordered before it (ghosts keep their place), before the others.
func (a *accountIndex) insertAt(k orderKey) int {
	i, _ := slices.BinarySearchFunc(a.order, k, func(s uint32, k orderKey) int { return a.compare(&a.recs[s], k) })
	return i
}

// position returns the index in order of the first entry not ordered
// before k that is not a ghost of k (len(order) when there is none), and
// whether it is k's email.
func (a *accountIndex) position(k orderKey) (int, bool) {
	i := a.insertAt(k)
	for i < len(a.order) && !a.recs[a.order[i]].used && a.compare(&a.recs[a.order[i]], k) == 0 {
		i++
	}
	return i, i < len(a.order) && a.recs[a.order[i]].used && a.compare(&a.recs[a.order[i]], k) == 0
}

// doc returns the record's Doc, with the fields f (allDocFields: all);
// its strings and labels are the index's, not to be changed.
func (a *accountIndex) doc(r *record, f docFields) Doc {
	d := Doc{Read: r.read, RawSize: r.rawSize}
	if f&docSender != 0 {
		d.Sender = a.text.get(r.sender)
	}
	if f&docRecipient != 0 {
		d.Recipient = a.text.get(r.recipient)
	}
	if f&docSubject != 0 {
		d.Subject = a.text.get(r.subject)
	}
	if f&docMessageID != 0 {
		d.MessageID = a.text.get(r.messageID)
	}
	if f&docLabels != 0 {
		d.Labels = a.labels.get(r.labels)
	}
	if f&docStatus != 0 {
		d.Status = store.Status(a.text.get(r.status))
	}
	if f&docTime != 0 {
		d.ReceivedAt = time.UnixMilli(r.received).UTC()
	}
	if f&docDigest != 0 {
		d.packed = a.digests.get(r.digest)
	}
	return d
}

// count adds (sign 1) or takes away (sign -1) r from the kept counts.
func (a *accountIndex) count(r *record, sign int64) {
	c := &a.counts
	if c.Statuses == nil {
		c.Statuses, c.Labels = map[store.Status]int64{}, map[string]LabelStats{}
	}
	unread := int64(0)
	if !r.read {
		unread = sign
	}
	c.Total += sign
	c.Unread += unread
	status := store.Status(a.text.get(r.status))
	if c.Statuses[status] += sign; c.Statuses[status] == 0 {
		delete(c.Statuses, status)
	}
	labels := a.labels.get(r.labels)
	for i, l := range labels {
		if slices.Contains(labels[:i], l) {
			continue // an email counts once for a label it carries twice
		}
		ls := c.Labels[l]
		ls.Total += sign
		ls.Unread += unread
		if ls.Total == 0 {
			delete(c.Labels, l)
		} else {
			c.Labels[l] = ls
		}
	}
}

// compactIfStale compacts text once it holds more that no record reads
// than there are records: the copy then costs each change O(1).
func (a *accountIndex) compactIfStale() {
	if a.stale > 1024 && a.stale > a.len() {
		a.compactText()
	}
}

// compactText copies the live records' strings (and odd ids) into new
// chunks, so that what removed emails held is given back.
func (a *accountIndex) compactText() {
	a.dropGhosts() // a ghost's odd id is read from odd, which is made anew
	old := a.text
	a.text = text{}
	var odd []string
	clear(a.oddIDs)
	for s := range a.recs {
		r := &a.recs[s]
		if !r.used {
			continue
		}
		r.sender = a.text.add(old.get(r.sender))
		r.recipient = a.text.add(old.get(r.recipient))
		r.subject = a.text.add(old.get(r.subject))
		r.messageID = a.text.add(old.get(r.messageID))
		r.status = a.text.add(old.get(r.status))
		if r.oddID {
			i := len(odd)
			odd = append(odd, a.odd[oddIndex(r.key)])
			a.oddIDs[odd[i]] = uint32(s)
			r.key = uuidKey{byte(i), byte(i >> 8), byte(i >> 16), byte(i >> 24)}
		}
	}
	a.odd, a.stale = odd, 0
}

// text keeps strings in chunks of chunkSize bytes that are only appended
// to: a string taken from one stays valid. Strings met lately are found
// in seen and kept once (the recipients of one message share its subject;
// a mailbox's addresses come again and again).
type text struct {
	chunks []*strings.Builder
	long   []string // strings longer than a span's n can say
	seen   map[string]span
}

// span is where a string is in text; the zero span is "".
type span struct {
	chunk  uint32 // 1 + its index in chunks, or in long when n is longSpan
	off, n uint16
}

const (
	chunkSize = 64 << 10
	longSpan  = ^uint16(0)
	maxSeen   = 4096
	seenLen   = 256 // longer strings are not looked for in seen
)

func (t *text) add(s string) span {
	if s == "" {
		return span{}
	}
	if sp, ok := t.seen[s]; ok {
		return sp
	}
	var sp span
	if len(s) >= int(longSpan) {
		t.long = append(t.long, s)
		return span{chunk: uint32(len(t.long)), n: longSpan}
	}
	if n := len(t.chunks); n == 0 || t.chunks[n-1].Len()+len(s) > chunkSize {
		b := &strings.Builder{}
		b.Grow(chunkSize) // never grown again: what was taken from it stays
		t.chunks = append(t.chunks, b)
	}
	b := t.chunks[len(t.chunks)-1]
	sp = span{chunk: uint32(len(t.chunks)), off: uint16(b.Len()), n: uint16(len(s))}
	b.WriteString(s)
	if len(s) <= seenLen {
		if len(t.seen) >= maxSeen || t.seen == nil {
			t.seen = make(map[string]span, maxSeen)
		}
		t.seen[t.get(sp)] = sp
	}
	return sp
}

// keep returns sp when it holds s already, else s's new span.
func (t *text) keep(sp span, s string) span {
	if t.get(sp) == s {
		return sp
	}
	return t.add(s)
}

func (t *text) get(sp span) string {
	switch {
	case sp.chunk == 0:
		return ""
	case sp.n == longSpan:
		return t.long[sp.chunk-1]
	}
	return t.chunks[sp.chunk-1].String()[sp.off : int(sp.off)+int(sp.n)]
}

// labelSets are the label lists the account's emails carry, each kept
// once and counted; set 0 is the empty list.
type labelSets struct {
	sets  []labelSet
	byKey map[string]uint32
	free  []uint32
}

type labelSet struct {
	labels []string
	key    string
	refs   int
}

func newLabelSets() labelSets {
	return labelSets{sets: make([]labelSet, 1), byKey: map[string]uint32{}}
}

func (l *labelSets) add(labels []string) uint32 {
	if len(labels) == 0 {
		return 0
	}
	var b strings.Builder
	for _, s := range labels {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	key := b.String()
	if i, ok := l.byKey[key]; ok {
		l.sets[i].refs++
		return i
	}
	i := put(&l.sets, &l.free, labelSet{labels: slices.Clone(labels), key: key, refs: 1})
	l.byKey[key] = i
	return i
}

func (l *labelSets) drop(i uint32) {
	if i == 0 {
		return
	}
	if l.sets[i].refs--; l.sets[i].refs == 0 {
		delete(l.byKey, l.sets[i].key)
		l.sets[i] = labelSet{}
		l.free = append(l.free, i)
	}
}

func (l *labelSets) get(i uint32) []string { return l.sets[i].labels }

// digestSlots are the digests of the account's emails, each shared by the
// emails of one message and counted; slot 0 is "none yet".
type digestSlots struct {
	slots []digestSlot
	free  []uint32
}

type digestSlot struct {
	p    packedDigest
	refs int
}

func (g *digestSlots) add(p packedDigest, refs int) uint32 {
	return put(&g.slots, &g.free, digestSlot{p: p, refs: refs})
}

// keep counts one more email for digest i.
func (g *digestSlots) keep(i uint32) {
	if i != 0 {
		g.slots[i].refs++
	}
}

func (g *digestSlots) drop(i uint32) {
	if i == 0 {
		return
	}
	if g.slots[i].refs--; g.slots[i].refs == 0 {
		g.slots[i] = digestSlot{}
		g.free = append(g.free, i)
	}
}

func (g *digestSlots) get(i uint32) packedDigest { return g.slots[i].p }

func (g *digestSlots) bloom(i uint32) bloomBits { return g.slots[i].p.bloom() }

// put puts v in a free slot of slots (one listed in free), or a new one,
// and returns its index.
func put[T any](slots *[]T, free *[]uint32, v T) uint32 {
	if n := len(*free); n > 0 {
		i := (*free)[n-1]
		*free = (*free)[:n-1]
		(*slots)[i] = v
		return i
	}
	*slots = append(*slots, v)
	return uint32(len(*slots) - 1)
}
