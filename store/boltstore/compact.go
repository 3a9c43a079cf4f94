package boltstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mailsink/mailsink/internal/rawzip"
)

// compactTxSize is how many bytes of keys and values Compact copies per
// transaction, so that a large file is not copied in one.
const compactTxSize = 64 << 20

// Compact rewrites the store file at path without the space that deleted
// emails left free, with the process that uses it stopped. bbolt reuses
// freed pages for new mail but never shrinks its file: after a large
// delete, Compact gives the space back to the disk. It also rewrites the
// records of older formats in the current one (bodies compressed, emails
// without their key's fields, no reference count of one), so that a file
// written by an older release shrinks too, and fills every page. It writes a
// new file beside path and renames it over path only when the copy is
// complete and synced, so that a failure leaves the old file as it was. It
// returns the sizes before and after.
func Compact(path string) (before, after int64, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	// Open checks the schema version and upgrades an older file, so that
	// what is copied is known to this build; it refuses a file in use.
	s, err := Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("%w (is mailsink still running?)", err)
	}
	if err := s.Close(); err != nil {
		return 0, 0, err
	}
	src, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return 0, 0, fmt.Errorf("open %s (is mailsink still running?): %w", path, err)
	}
	defer src.Close()
	tmp := path + ".compact"
	_ = os.Remove(tmp)
	size, err := copyCompact(tmp, src)
	if err != nil {
		os.Remove(tmp)
		return 0, 0, fmt.Errorf("compact %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return 0, 0, err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return fi.Size(), size, nil
}

// copyCompact copies src into a new file at path, record by record, and
// returns the new file's size. bbolt grows a file ahead of its data (up to
// 16 MiB); the copy is cut to its last page.
func copyCompact(path string, src *bolt.DB) (int64, error) {
	dst, err := bolt.Open(path, 0o600, &bolt.Options{FreelistType: bolt.FreelistMapType, NoSync: true})
	if err != nil {
		return 0, err
	}
	w := &compactWriter{dst: dst}
	err = src.View(func(stx *bolt.Tx) error {
		return stx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return w.bucket([][]byte{name}, b)
		})
	})
	if err == nil {
		err = w.commit()
	}
	var size int64
	if err == nil {
		err = dst.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil })
	}
	if err == nil {
		err = dst.Sync()
	}
	if w.tx != nil {
		_ = w.tx.Rollback()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return size, err
}

// compactWriter writes the copy in transactions of about compactTxSize.
type compactWriter struct {
	dst  *bolt.DB
	tx   *bolt.Tx
	size int
	zip  rawzip.Compressor // for bodies rewritten in the current format
}

func (w *compactWriter) commit() error {
	if w.tx == nil {
		return nil
	}
	tx := w.tx
	w.tx, w.size = nil, 0
	return tx.Commit()
}

// begin makes sure a transaction is open with room for n more bytes,
// committing the current one when it is full.
func (w *compactWriter) begin(n int) error {
	if w.tx != nil && w.size+n <= compactTxSize {
		w.size += n
		return nil
	}
	if err := w.commit(); err != nil {
		return err
	}
	tx, err := w.dst.Begin(true)
	if err != nil {
		return err
	}
	w.tx, w.size = tx, n
	return nil
}

// lookup returns the copy's bucket at path in the current transaction,
// set to fill its pages: the copy writes keys in order.
func (w *compactWriter) lookup(path [][]byte) *bolt.Bucket {
	b := w.tx.Bucket(path[0])
	for _, name := range path[1:] {
		b = b.Bucket(name)
	}
	b.FillPercent = 1
	return b
}

// bucket copies the bucket b found at path, with its nested buckets and
// sequence, rewriting email and body records in the current formats.
func (w *compactWriter) bucket(path [][]byte, b *bolt.Bucket) error {
	if err := w.begin(0); err != nil {
		return err
	}
	var nb *bolt.Bucket
	var err error
	if len(path) == 1 {
		nb, err = w.tx.CreateBucket(path[0])
	} else {
		nb, err = w.lookup(path[:len(path)-1]).CreateBucket(path[len(path)-1])
	}
	if err != nil {
		return err
	}
	if err := nb.SetSequence(b.Sequence()); err != nil {
		return err
	}
	top := len(path) == 1
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v == nil {
			if err := w.bucket(append(path[:len(path):len(path)], k), b.Bucket(k)); err != nil {
				return err
			}
			continue
		}
		if top {
			var keep bool
			if v, keep, err = rewrite(&w.zip, path[0], k, v); err != nil {
				return err
			}
			if !keep {
				continue
			}
		}
		if err := w.begin(len(k) + len(v)); err != nil {
			return err
		}
		if err := w.lookup(path).Put(k, v); err != nil {
			return err
		}
	}
	return nil
}

// rewrite returns the record v under key k of the top-level bucket in the
// current format, and false when it is not kept.
func rewrite(z *rawzip.Compressor, bucket, k, v []byte) ([]byte, bool, error) {
	switch {
	case bytes.Equal(bucket, bucketEmails) && len(v) > 0 && v[0] != emailFormat:
		r, err := decodeEmail(k, v)
		if err != nil {
			return nil, false, fmt.Errorf("email %x: %w", k, err)
		}
		return encodeEmail(r), true, nil
	case bytes.Equal(bucket, bucketBodies) && len(v) > 0 && v[0] != bodyFormat:
		body, err := decodeBody(v)
		if err != nil {
			return nil, false, fmt.Errorf("body %x: %w", k, err)
		}
		return encodeBody(z, body), true, nil
	case bytes.Equal(bucket, bucketRefs):
		n, size := binary.Uvarint(v)
		if size <= 0 {
			return nil, false, errors.New("corrupt reference count")
		}
		return v, n > 1, nil
	}
	return v, true, nil
}
