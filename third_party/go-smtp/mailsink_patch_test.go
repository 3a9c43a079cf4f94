package smtp

// Tests of mailsink's patches to data.go and lengthlimit_reader.go: the
// patched readers must give exactly what the original byte-by-byte ones
// give, for any input and any read sizes.

import (
	"bufio"
	"bytes"
	"io"
	"math/rand"
	"testing"
	"testing/iotest"
)

// origDataRead is dataReader.Read as released in v0.25.1, without the limit.
func origDataRead(r *bufio.Reader, state *int, b []byte) (n int, err error) {
	const (
		stateBeginLine = iota
		stateDot
		stateDotCR
		stateCR
		stateData
		stateEOF
	)
	for n < len(b) && *state != stateEOF {
		var c byte
		c, err = r.ReadByte()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			break
		}
		switch *state {
		case stateBeginLine:
			if c == '.' {
				*state = stateDot
				continue
			}
			if c == '\r' {
				*state = stateCR
				break
			}
			*state = stateData
		case stateDot:
			if c == '\r' {
				*state = stateDotCR
				continue
			}
			*state = stateData
		case stateDotCR:
			if c == '\n' {
				*state = stateEOF
				continue
			}
			*state = stateData
		case stateCR:
			if c == '\n' {
				*state = stateBeginLine
				break
			}
			*state = stateData
		case stateData:
			if c == '\r' {
				*state = stateCR
			}
		}
		b[n] = c
		n++
	}
	if err == nil && *state == stateEOF {
		err = io.EOF
	}
	return
}

// randomMessage is made of the bytes that matter to the state machine.
func randomMessage(rng *rand.Rand) []byte {
	alphabet := []byte(".\r\nab")
	b := make([]byte, rng.Intn(3000))
	for i := range b {
		b[i] = alphabet[rng.Intn(len(alphabet))]
	}
	if rng.Intn(2) == 0 {
		b = append(b, "\r\n.\r\nQUIT\r\n"...)
	}
	return b
}

// readAllIn reads r with reads of random sizes; the rest of the input must
// stay in the bufio.Reader.
func readAllIn(rng *rand.Rand, read func([]byte) (int, error)) ([]byte, error) {
	var out []byte
	for {
		b := make([]byte, 1+rng.Intn(300))
		n, err := read(b)
		out = append(out, b[:n]...)
		if err != nil {
			return out, err
		}
	}
}

func TestPatchedDataReaderMatchesOriginal(t *testing.T) {
	for seed := int64(0); seed < 3000; seed++ {
		msg := randomMessage(rand.New(rand.NewSource(seed)))
		// A one-byte underlying reader makes the buffer hold little, so
		// both paths of the patched reader run.
		under := func() io.Reader {
			if seed%2 == 0 {
				return iotest.OneByteReader(bytes.NewReader(msg))
			}
			return bytes.NewReader(msg)
		}
		ob := bufio.NewReaderSize(under(), 16)
		state := 0
		rng := rand.New(rand.NewSource(seed))
		want, wantErr := readAllIn(rng, func(b []byte) (int, error) { return origDataRead(ob, &state, b) })
		wantRest, _ := io.ReadAll(ob)

		nb := bufio.NewReaderSize(under(), 16)
		dr := &dataReader{r: nb}
		rng = rand.New(rand.NewSource(seed))
		got, gotErr := readAllIn(rng, dr.Read)
		gotRest, _ := io.ReadAll(nb)

		if !bytes.Equal(got, want) || gotErr != wantErr || !bytes.Equal(gotRest, wantRest) {
			t.Fatalf("seed %d: got %q, %v, rest %q; want %q, %v, rest %q", seed, got, gotErr, gotRest, want, wantErr, wantRest)
		}
	}
}

// origLineLimitCount is lineLimitReader's count as released in v0.25.1.
func origLineLimitCount(cur *int, limit int, b []byte) error {
	for _, chr := range b {
		if chr == '\n' {
			*cur = 0
		}
		*cur++
		if *cur > limit {
			return ErrTooLongLine
		}
	}
	return nil
}

func TestPatchedLineLimitMatchesOriginal(t *testing.T) {
	for seed := int64(0); seed < 3000; seed++ {
		rng := rand.New(rand.NewSource(seed))
		limit := 1 + rng.Intn(40)
		msg := randomMessage(rng)
		r := &lineLimitReader{R: iotest.HalfReader(bytes.NewReader(msg)), LineLimit: limit}
		cur := 0
		var ref error
		pos := 0
		for {
			b := make([]byte, 1+rng.Intn(100))
			n, err := r.Read(b)
			if err == io.EOF {
				break
			}
			// The original counted the bytes the underlying reader gave.
			m := (len(b) + 1) / 2
			if m > len(msg)-pos {
				m = len(msg) - pos
			}
			if ref == nil {
				ref = origLineLimitCount(&cur, limit, msg[pos:pos+m])
			}
			pos += m
			if (err != nil) != (ref != nil) {
				t.Fatalf("seed %d at byte %d: patched reader says %v, original %v", seed, pos, err, ref)
			}
			if err != nil {
				// Sticky, as before.
				if _, again := r.Read(make([]byte, 10)); again != ErrTooLongLine {
					t.Fatalf("seed %d: error did not stick: %v", seed, again)
				}
				break
			}
			if n != m {
				t.Fatalf("seed %d: read %d bytes, want %d", seed, n, m)
			}
		}
	}
}
