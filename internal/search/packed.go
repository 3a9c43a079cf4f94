package search

import "encoding/binary"

// packedDigest is a Digest, without its Text, in one string: the index
// keeps one per message. As a struct of strings and lists it was about 600
// bytes and a dozen objects per message, most of the live heap after an
// ingest of 2 KB messages (docs/benchmarks.md); packed, it is its bytes and
// a few more, in one object the collector does not scan. Its strings are
// read as substrings of it, without a copy.
//
// The Bloom filter of the digest's words (Index.bloomOf) comes first, in
// the same string: a slot per message holds one string and a count.
//
// Layout, each count and length an unsigned varint: the filter's length in
// 64-bit words and its words, 8 bytes each, little-endian; the
// attachments' count; the snippet's length and bytes; then the lists
// FromNames, FromAddresses, ToAddresses and ToNames, each as its length
// and its strings' lengths and bytes. The empty string is "no digest".
type packedDigest string

// pack returns d packed with its words' filter bloom; its Text is left
// out.
func pack(d *Digest, bloom []uint64) packedDigest {
	lists := d.lists()
	n := binary.MaxVarintLen64*3 + 8*len(bloom)
	n += len(d.Snippet)
	for _, l := range lists {
		n += binary.MaxVarintLen64
		for _, s := range *l {
			n += binary.MaxVarintLen64 + len(s)
		}
	}
	b := make([]byte, 0, n)
	b = binary.AppendUvarint(b, uint64(len(bloom)))
	for _, w := range bloom {
		b = binary.LittleEndian.AppendUint64(b, w)
	}
	b = binary.AppendUvarint(b, uint64(max(0, d.Attachments)))
	b = appendString(b, d.Snippet)
	for _, l := range lists {
		b = binary.AppendUvarint(b, uint64(len(*l)))
		for _, s := range *l {
			b = appendString(b, s)
		}
	}
	return packedDigest(b)
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// lists returns d's lists in the packed order, that of the list consts.
func (d *Digest) lists() [4]*[]string {
	return [4]*[]string{&d.FromNames, &d.FromAddresses, &d.ToAddresses, &d.ToNames}
}

// The lists of a digest, in the packed order.
const (
	listFromNames = iota
	listFromAddresses
	listToAddresses
	listToNames
)

// any reports whether f is true of a string of p's lists in the set lists
// (bit i for list i), read in place.
func (p packedDigest) any(lists uint8, f func(string) bool) bool {
	if p == "" {
		return false
	}
	r := packedReader{p: p}
	r.skipBloom()
	r.uvarint()
	r.string()
	for i := range 4 {
		n := r.uvarint()
		for range n {
			if s := r.string(); lists&(1<<i) != 0 && f(s) {
				return true
			}
		}
		if lists>>(i+1) == 0 {
			break
		}
	}
	return false
}

// Summary is what a message list shows of an email's digest.
type Summary struct {
	// FromName is the From header's first display name, "" when it has
	// none.
	FromName    string
	Snippet     string
	Attachments int
}

// bloomBits is a Bloom filter as packed: bit b is bit b%8 of byte b/8,
// as in 64-bit words written little-endian.
type bloomBits string

func (b bloomBits) has(bit uint64) bool { return b[bit/8]&(1<<(bit%8)) != 0 }

// bloom returns p's filter; "" when p is no digest or its text had no
// words.
func (p packedDigest) bloom() bloomBits {
	r := packedReader{p: p}
	n := int(min(r.uvarint(), uint64(len(p)-r.off)/8))
	return bloomBits(p[r.off : r.off+8*n])
}

// summary reads p's Summary; its strings are p's.
func (p packedDigest) summary() Summary {
	r := packedReader{p: p}
	r.skipBloom()
	var s Summary
	s.Attachments = int(r.uvarint())
	s.Snippet = r.string()
	if r.uvarint() > 0 {
		s.FromName = r.string()
	}
	return s
}

// unpack returns p as a new Digest, or nil for "no digest"; its strings
// are p's.
func (p packedDigest) unpack() *Digest {
	if p == "" {
		return nil
	}
	r := packedReader{p: p}
	r.skipBloom()
	d := &Digest{Attachments: int(r.uvarint()), Snippet: r.string()}
	for _, l := range d.lists() {
		for range r.uvarint() {
			*l = append(*l, r.string())
		}
	}
	return d
}

// packedReader reads a packedDigest from its start. pack wrote it, so it
// is read without checks beyond staying within it.
type packedReader struct {
	p   packedDigest
	off int
}

func (r *packedReader) uvarint() uint64 {
	var v uint64
	for shift := uint(0); r.off < len(r.p) && shift < 64; shift += 7 {
		c := r.p[r.off]
		r.off++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
	return v
}

func (r *packedReader) skipBloom() {
	r.off += int(min(r.uvarint(), uint64(len(r.p)-r.off)/8)) * 8
}

func (r *packedReader) string() string {
	n := int(min(r.uvarint(), uint64(len(r.p)-r.off)))
	s := string(r.p[r.off : r.off+n])
	r.off += n
	return s
}
