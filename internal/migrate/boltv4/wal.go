package boltv4

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mailsink/mailsink/internal/batch"
	"github.com/mailsink/mailsink/store"
)

// Write-ahead log. A bbolt commit writes every page it dirties with a
// system call of its own and calls fdatasync twice, whatever it carries; an
// SMTP message waited for all of that before its 250. Creates (the bulk of
// the writes) now go to a log first: the creates of concurrent sessions are
// appended to it with one write and made durable with one fdatasync, then
// answered. A background applier then writes what the log holds to bbolt in
// larger transactions, each recording the last log number it applied
// (metaWAL), and deletes log files once all they hold is applied. Open
// loads what a crash left in the log as pending creates, which the applier
// applies like any others (so a store on a full disk still opens).
//
// Reads see every answered create. A create is pending from its log write
// until its bbolt commit. A read takes the account's pending creates, then
// opens its bbolt transaction and reads the applied number there: a create
// numbered above it is not in the transaction. A read by id, a first page of
// a list and a count take such emails from memory, so a test that polls for
// its message right after the 250 finds it without waiting; a later page, or
// one after a pending email, waits for the applier (a few milliseconds).
// Updates and deletes of a pending email wait for it to be applied. While the
// applier fails (a full disk), reads that may answer without pending creates
// do not wait.
//
// Bodies over walMaxBody go straight to bbolt, as before: writing them twice
// would cost more than the commit saves.
//
// A log file, mailsink.db.wal.<first number in hex>, is a sequence of
// frames: uint32 length and CRC-32C (Castagnoli) of the payload, both
// big-endian, then the payload, whose first byte is its kind. A frame that
// does not check out ends the file's replay: it is a write that was never
// answered. After a failed write the file is cut back to where the frame
// began; when that fails too, the next frame goes to a new file that starts
// by cancelling the numbers the failed frames had taken.

const (
	walMaxBody       = 1 << 20
	walSegmentSize   = 16 << 20
	walRotateApplied = 4 << 20 // a fully applied file at least this big is replaced
	// walMaxPending bounds the emails logged but not applied (a create of
	// 50 recipients counts 50) before new creates wait, and so what a
	// first page of a list merges from memory (walread.go) and how far the
	// applier may fall behind. walMaxPendingRaw bounds their bodies.
	walMaxPending    = 4096
	walMaxPendingRaw = 64 << 20
	// walApplyBatch bounds the emails of one apply transaction, and so the
	// events it publishes at once.
	walApplyBatch = 1000
	// walApplyEvery is how long creates gather between apply commits:
	// each commit writes every bbolt page its creates touch (an index
	// leaf shared by 50 creates is written once, not 50 times), with two
	// fdatasyncs. 50 ms against 10 ms, 2 KB messages, binaries
	// alternated: 3,883-5,314 -> 4,284-5,585 msg/s, 190-276 -> 187-245 µs
	// of CPU per message (docs/benchmarks.md, "Round 2, fourth step").
	// Nothing waits for it: reads of pending creates kick the applier
	// (urgent), and so do creates of an account whose events someone
	// listens for (soon), since a create's event goes out once applied.
	walApplyEvery = 50 * time.Millisecond
	walApplySoon  = 10 * time.Millisecond
	// walGather is how long a log write may wait for the creates that
	// recent writes suggest are coming (batch.Gather): concurrent sessions
	// then share more fdatasyncs (4.3 creates per write instead of 2.25).
	// 2 KB messages over 8 connections, five alternated rounds: 5,855 ->
	// 6,189 msg/s on average, 174 -> 163 µs of CPU per message; one and
	// two connections did not slow down (docs/benchmarks.md, "Round 2,
	// seventh step").
	walGather = 800 * time.Microsecond

	frameCreate byte = 1
	frameCancel byte = 2
)

var (
	metaWAL = []byte("wal")
	// metaVoided holds the cancels (uvarint first and last number) that
	// could not be written to a log file.
	metaVoided = []byte("walvoid")
	castagnol  = crc32.MakeTable(crc32.Castagnoli)
)

// walOp is one create in the log.
type walOp struct {
	lsn uint64
	op  *createOp
}

// walCall is one create waiting for a log write.
type walCall struct {
	op  *createOp
	lsn uint64
	err error
}

// walLog is the log and the creates it holds that bbolt does not have yet.
type walLog struct {
	base    string // path of the bbolt file; files are base + ".wal." + hex
	db      *bolt.DB
	batches *batch.Batcher[*walCall]

	// Used by one log write at a time (the batcher runs one batch at once).
	file    *os.File
	size    int64
	first   uint64 // first number of file
	voided  spans
	broken  bool        // the last failed write could not be cut back
	owed    atomic.Bool // voided is not empty
	buf     []byte
	nextLSN uint64

	mu sync.Mutex
	// pending holds the logged creates not applied yet, in log order.
	pending    []walOp
	pendingRaw int64
	nPending   int // emails in pending
	maxPending int // new creates wait while nPending has reached it (walMaxPending; set by Open)
	byAccount  map[string]int
	byKey      map[string]uint64 // email key -> log number
	direct     map[string]int    // email keys of creates going straight to bbolt
	applied    uint64            // the last log number applied
	applyErr   error             // the last apply's failure, nil once one succeeds
	changed    chan struct{}     // closed and replaced when pending shrinks or applyErr changes
	files      []walFile         // files before the current one
	kick       chan struct{}
	soon       chan struct{} // a logged create's events are listened for
	// every and soonEvery are how long creates gather between applies
	// (gather); set by Open.
	every, soonEvery time.Duration
	urgent           chan struct{} // a reader or writer waits for the applier
	stop             chan struct{}
	stopOnce         sync.Once
	// spareDone gets the outcome of filling the next file's spare;
	// spareFilling is set from the start of that until its outcome is
	// taken. filled tells whether the current file was a spare.
	spareDone    chan error
	spareFilling bool
	spareWG      sync.WaitGroup
	filled       bool
	stopped      chan struct{}
}

type walFile struct {
	path string
	last uint64 // the last log number it holds
}

func walPath(base string, first uint64) string {
	return fmt.Sprintf("%s.wal.%016x", base, first)
}

// walFiles returns the log files beside base, in log order.
func walFiles(base string) ([]string, error) {
	paths, err := filepath.Glob(base + ".wal.*")
	if err != nil {
		return nil, err
	}
	out := paths[:0]
	for _, p := range paths {
		if _, err := strconv.ParseUint(strings.TrimPrefix(p, base+".wal."), 16, 64); err == nil {
			out = append(out, p)
		}
	}
	sort.Strings(out) // fixed-width hex: name order is number order
	return out, nil
}

// readApplied returns the last log number applied to the file of tx.
func readApplied(tx *bolt.Tx) uint64 {
	v := tx.Bucket(bucketMeta).Get(metaWAL)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func writeApplied(tx *bolt.Tx, lsn uint64) error {
	return tx.Bucket(bucketMeta).Put(metaWAL, binary.BigEndian.AppendUint64(nil, lsn))
}

// maxLSN bounds the log numbers Open accepts, far above what a process can
// use, so that a number read from a file can never wrap around.
const maxLSN = 1 << 62

// loadedLog is what Open reads from the log files of a store.
type loadedLog struct {
	applied uint64    // the last number bbolt has
	next    uint64    // the next number to give
	ops     []walOp   // the creates above applied, not cancelled, in log order
	files   []walFile // every file, last being its last create in ops (0: none)
}

// loadWAL reads the log files beside base. Their creates are applied by the
// applier like any others, so that a store whose disk is full still opens
// and serves reads. Every frame's number must fit its file: above the
// file's own number and below the next file's; a cancel frame names only
// numbers before its file's. A frame that checks out but breaks that is a
// corrupt file, and Open fails naming it rather than guess.
func loadWAL(db *bolt.DB, base string) (loadedLog, error) {
	var l loadedLog
	paths, err := walFiles(base)
	if err != nil {
		return l, err
	}
	var voided spans
	err = db.View(func(tx *bolt.Tx) error {
		l.applied = readApplied(tx)
		voided, err = readVoided(tx)
		return err
	})
	if err != nil {
		return l, err
	}
	l.next = l.applied + 1
	firsts := make([]uint64, len(paths)+1)
	for i, p := range paths {
		firsts[i], _ = strconv.ParseUint(strings.TrimPrefix(p, base+".wal."), 16, 64)
	}
	firsts[len(paths)] = maxLSN
	// All files are read before anything is kept: a cancel frame comes
	// after the frames it voids, in a later file.
	var ops []walOp
	owner := []int{} // index in paths of each op's file
	for i, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return l, err
		}
		prev := firsts[i]
		err = readFrames(data, func(kind byte, lsn uint64, f decodedFrame) error {
			switch {
			case kind == frameCancel && (lsn > f.voidTo || f.voidTo >= firsts[i]):
				return fmt.Errorf("a cancel frame of numbers %d to %d in a file that starts at %d", lsn, f.voidTo, firsts[i])
			case kind == frameCancel:
				voided = append(voided, [2]uint64{lsn, f.voidTo})
				return nil
			case lsn <= prev || lsn >= firsts[i+1]:
				return fmt.Errorf("frame number %d out of place (after %d, before %d)", lsn, prev, firsts[i+1])
			}
			prev = lsn
			if lsn > l.applied {
				ops = append(ops, walOp{lsn: lsn, op: f.create})
				owner = append(owner, i)
			}
			return nil
		})
		if err != nil {
			return l, fmt.Errorf("log file %s: %w", p, err)
		}
		l.next = max(l.next, prev+1)
		l.files = append(l.files, walFile{path: p})
	}
	for j, o := range ops {
		if !voided.holds(o.lsn) {
			l.ops = append(l.ops, o)
			l.files[owner[j]].last = o.lsn
		}
	}
	return l, nil
}

// readFrames calls visit with each frame of a log file's data, up to the
// first that does not check out: a write that was never answered.
func readFrames(data []byte, visit func(kind byte, lsn uint64, f decodedFrame) error) error {
	for len(data) >= 8 {
		n := binary.BigEndian.Uint32(data)
		// Zeros: the part of the file not written yet.
		if n == 0 || uint64(n) > uint64(len(data)-8) || crc32.Checksum(data[8:8+n], castagnol) != binary.BigEndian.Uint32(data[4:]) {
			return nil
		}
		kind, lsn, f, err := decodeFrame(data[8 : 8+n])
		if err != nil {
			return err
		}
		if err := visit(kind, lsn, f); err != nil {
			return err
		}
		data = data[8+n:]
	}
	return nil
}

// spans are ranges of log numbers, first and last included.
type spans [][2]uint64

func (s spans) holds(n uint64) bool {
	for _, r := range s {
		if r[0] <= n && n <= r[1] {
			return true
		}
	}
	return false
}

type decodedFrame struct {
	create *createOp
	voidTo uint64
}

func encodeCreateFrame(dst []byte, lsn uint64, op *createOp) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, frameCreate)
	dst = binary.AppendUvarint(dst, lsn)
	dst = binary.AppendUvarint(dst, uint64(len(op.emails)))
	for i, e := range op.emails {
		rec := encodeEmail(&emailRecord{Email: *e})
		dst = binary.AppendUvarint(dst, uint64(len(op.keys[i])))
		dst = append(dst, op.keys[i]...)
		dst = binary.AppendUvarint(dst, uint64(len(rec)))
		dst = append(dst, rec...)
	}
	dst = append(dst, op.body...)
	return sealFrame(dst, start)
}

func encodeCancelFrame(dst []byte, from, to uint64) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, frameCancel)
	dst = binary.AppendUvarint(dst, from)
	dst = binary.AppendUvarint(dst, to)
	return sealFrame(dst, start)
}

func sealFrame(dst []byte, start int) []byte {
	payload := dst[start+8:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(payload)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(payload, castagnol))
	return dst
}

func decodeFrame(p []byte) (kind byte, lsn uint64, f decodedFrame, err error) {
	d := decoder{b: p}
	kind = d.byte()
	lsn = d.uvarint()
	switch kind {
	case frameCancel:
		f.voidTo = d.uvarint()
		return kind, lsn, f, d.done()
	case frameCreate:
	default:
		return 0, 0, f, errCorrupt
	}
	n := d.count()
	emails := make([]*store.Email, n)
	for i := range emails {
		k, v := d.view(), d.view()
		if d.err != nil {
			return 0, 0, f, d.err
		}
		r, err := decodeEmail(k, v)
		if err != nil {
			return 0, 0, f, err
		}
		emails[i] = &r.Email
	}
	if d.err != nil || len(emails) == 0 {
		return 0, 0, f, errCorrupt
	}
	if _, err := decodeBody(d.b); err != nil {
		return 0, 0, f, err
	}
	op := &createOp{emails: emails, body: append([]byte(nil), d.b...)}
	op.prepare()
	f.create = op
	return kind, lsn, f, nil
}

// readVoided returns the cancels settleVoided wrote into bbolt.
func readVoided(tx *bolt.Tx) (spans, error) {
	var out spans
	d := decoder{b: tx.Bucket(bucketMeta).Get(metaVoided)}
	for len(d.b) > 0 && d.err == nil {
		out = append(out, [2]uint64{d.uvarint(), d.uvarint()})
	}
	return out, d.err
}
