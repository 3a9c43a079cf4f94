package boltstore

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mailsink/mailsink/store"
)

// This file is a prototype measured against the store, not a store: a
// log-structured commit on bbolt, as the issue suggests (one sequential
// write and one fsync per group of concurrent creates). logStore appends
// each group's records to a log file and syncs it, then applies the group
// to bbolt without syncing bbolt (db.NoSync), either at once or, with
// applyEvery, every so often in one transaction; bbolt's file is synced and
// the log emptied once a second. It has no reads, no recovery and no
// overlay of what is logged but not applied: a store built this way needs
// all three. BenchmarkCommitLayout compares it with Store.CreateEmails.

type logReq struct {
	op   *createOp
	done chan error
}

type logStore struct {
	db         *bolt.DB
	log        *os.File
	reqs       chan *logReq
	applyEvery time.Duration
	pending    []*createOp
	lastApply  time.Time
	lastSync   time.Time
	syncs      atomic.Int64
	stopped    chan struct{}
}

func openLogStore(tb testing.TB, dir string, applyEvery time.Duration) *logStore {
	tb.Helper()
	s := openTemp(tb, filepath.Join(dir, "mailsink.db"))
	s.db.NoSync = true
	f, err := os.OpenFile(filepath.Join(dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	l := &logStore{db: s.db, log: f, reqs: make(chan *logReq, 1024), applyEvery: applyEvery,
		lastApply: time.Now(), lastSync: time.Now(), stopped: make(chan struct{})}
	go l.loop()
	tb.Cleanup(func() {
		close(l.reqs)
		<-l.stopped
		_ = l.db.Sync()
		_ = f.Close()
	})
	return l
}

func (l *logStore) create(body *store.Body, emails []*store.Email) error {
	r := &logReq{op: newCreateOp(body, emails), done: make(chan error, 1)}
	l.reqs <- r
	return <-r.done
}

// loop commits what arrived while the last group was committed, as
// internal/batch does for the store.
func (l *logStore) loop() {
	defer close(l.stopped)
	var buf []byte
	for first := range l.reqs {
		group := []*logReq{first}
	more:
		for len(group) < 1000 {
			select {
			case r, ok := <-l.reqs:
				if !ok {
					break more
				}
				group = append(group, r)
			default:
				break more
			}
		}
		buf = buf[:0]
		for _, r := range group {
			buf = binary.AppendUvarint(buf, uint64(len(r.op.body)))
			buf = append(buf, r.op.body...)
			for _, e := range r.op.emails {
				rec := encodeEmail(&emailRecord{Email: *e})
				buf = binary.AppendUvarint(buf, uint64(len(rec)))
				buf = append(buf, rec...)
			}
		}
		_, err := l.log.Write(buf)
		if err == nil {
			err = l.log.Sync()
			l.syncs.Add(1)
		}
		if err == nil {
			for _, r := range group {
				l.pending = append(l.pending, r.op)
			}
			if time.Since(l.lastApply) >= l.applyEvery {
				ops := l.pending
				l.pending, l.lastApply = nil, time.Now()
				err = l.db.Update(func(tx *bolt.Tx) error {
					for _, op := range ops {
						if err := op.apply(tx); err != nil {
							return err
						}
					}
					return nil
				})
			}
		}
		if err == nil && time.Since(l.lastSync) >= time.Second {
			if err = l.db.Sync(); err == nil {
				err = l.log.Truncate(0)
			}
			l.syncs.Add(1)
			l.lastSync = time.Now()
		}
		for _, r := range group {
			r.done <- err
		}
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCommitLayout creates one email of a 2 KB realistic message per
// operation, as SMTP ingest does, from 4×GOMAXPROCS goroutines, with the
// store and with the log prototype (applied to bbolt at once, or every
// 50 ms), and reports the process's CPU time and fsyncs per create:
//
//	go test -run '^$' -bench BenchmarkCommitLayout -benchtime 20000x ./store/boltstore
func BenchmarkCommitLayout(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	raws := make([][]byte, 100)
	for i := range raws {
		raws[i] = realisticMessage(r, i, 2048, fmt.Sprintf("r%d.run@bench.test", i))
	}
	body := func(i int64) (*store.Body, *store.Email) {
		raw := raws[i%100]
		rcpt := fmt.Sprintf("r%d.run@bench.test", i%100)
		now := time.Now().UTC()
		e := &store.Email{
			ID: store.NewID(), AccountID: "6f1d5a8e-3c1b-4f7e-9a2d-5b8c0e4d7f10", Sender: "sender@bench.test", Recipient: rcpt,
			Status: store.StatusReceived, Labels: []string{}, RawSize: int64(len(raw)),
			MessageID: ptr(fmt.Sprintf("<m%d.run@bench.test>", i)), Subject: ptr(fmt.Sprintf("bench run m%d", i)),
			ReceivedAt: now, CreatedAt: now, UpdatedAt: now,
		}
		return &store.Body{Raw: raw, Headers: map[string]string{}, Attachments: []store.Attachment{}, Unparsed: true,
			Transcript: &store.Transcript{ClientAddress: "127.0.0.1:40000", Helo: "localhost",
				Mail:  store.TranscriptCommand{Address: "sender@bench.test", Params: []string{}, Reply: "250 2.0.0 Roger"},
				Rcpts: []store.TranscriptCommand{{Address: rcpt, Params: []string{}, Reply: "250 2.0.0 ok"}},
				Data:  "250 2.0.0 OK: queued"}}, e
	}
	for _, layout := range []string{"store", "log+apply", "log+apply-50ms"} {
		b.Run(layout, func(b *testing.B) {
			var create func(*store.Body, []*store.Email) error
			var syncs func() int64
			switch layout {
			case "store":
				s := openTemp(b, filepath.Join(b.TempDir(), "mailsink.db"))
				create = func(body *store.Body, e []*store.Email) error { return s.CreateEmails(b.Context(), body, e) }
				syncs = func() int64 { return 2 * s.commits.commits.Load() }
			default:
				every := time.Duration(0)
				if layout == "log+apply-50ms" {
					every = 50 * time.Millisecond
				}
				l := openLogStore(b, b.TempDir(), every)
				create, syncs = l.create, l.syncs.Load
			}
			var n atomic.Int64
			b.SetParallelism(4)
			cpu0 := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					body, e := body(n.Add(1))
					if err := create(body, []*store.Email{e}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64(syncs())/float64(b.N), "fsyncs/op")
		})
	}
}
