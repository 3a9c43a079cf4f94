package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Footprint is what the store keeps per email after an ingest of Emails
// emails of RawBytes each into a mailsink of its own: on Redis, the growth
// of used_memory across the ingest, and the MEMORY USAGE of every key under
// the server's prefix; on the embedded store, the size of the data
// directory with the server stopped (it flushes its memtables on the way
// out), with Pebble's log files, which it keeps for reuse up to a bound,
// apart.
type Footprint struct {
	Backend  string
	Emails   int
	RawBytes int
	// Redis.
	UsedBefore, UsedAfter int64
	Keys                  int
	KeyBytes              int64 // sum of MEMORY USAGE key SAMPLES 0
	// Embedded.
	DirBefore int64 // bytes of every file in the data directory
	DirAfter  int64 // of them, the files other than Pebble's log files
	DiskAfter int64 // blocks allocated to those (du), in bytes
	Logs      int64 // bytes of Pebble's log files
	// Scenario is the ingest that stored the emails.
	Scenario *Result
}

// PerEmail returns the stored bytes per email the verdict is about: the
// growth of used_memory on Redis, the data directory without the log files
// on the embedded store.
func (f *Footprint) PerEmail() float64 {
	if f.Emails == 0 {
		return 0
	}
	if f.Backend == "redis" {
		return float64(f.UsedAfter-f.UsedBefore) / float64(f.Emails)
	}
	return float64(f.DirAfter) / float64(f.Emails)
}

// FootprintScenario is the ingest a footprint is measured after: 2 KB plain
// messages, one recipient each, over 8 reused connections.
func FootprintScenario(messages int) Scenario {
	return Scenario{Name: "footprint-2k", Kind: "ingest", Messages: messages, Connections: 8, Reuse: true,
		Size: 2048, Shape: ShapePlain, Recipients: 100, PerMessage: 1, Verify: true}
}

// MeasureFootprint starts a mailsink of its own with o (on Redis under a
// fresh prefix, or on a fresh data directory), runs s, and measures what
// the store holds per email; it stops the server and deletes its data.
func MeasureFootprint(ctx context.Context, o ServerOptions, s Scenario, log func(format string, args ...any)) (*Footprint, error) {
	o.KeepData = true
	srv, err := StartServer(ctx, o)
	if err != nil {
		return nil, err
	}
	defer srv.RemoveData()
	f := &Footprint{Backend: srv.Backend}
	r := NewRunner(srv.Target, srv, nil)
	res, err := r.Run(ctx, s)
	f.Scenario = res
	if err != nil {
		srv.Stop()
		return f, err
	}
	f.Emails, f.RawBytes = res.Ingest.Sent*s.PerMessage, res.MessageBytes
	if srv.redis != nil {
		f.UsedBefore, f.UsedAfter = res.RedisUsedBefore, res.RedisUsedAfter
		f.Keys, f.KeyBytes, err = prefixMemory(ctx, srv.redis, srv.prefix)
		log("footprint on redis: %d emails of %d bytes: used_memory %d -> %d (%.0f B per email); %d keys, MEMORY USAGE %d B (%.0f B per email)",
			f.Emails, f.RawBytes, f.UsedBefore, f.UsedAfter, f.PerEmail(), f.Keys, f.KeyBytes, float64(f.KeyBytes)/float64(max(f.Emails, 1)))
		return f, errors.Join(err, srv.Stop())
	}
	dir := srv.DataDir()
	if err := srv.Stop(); err != nil {
		return f, err
	}
	if f.DirBefore, err = dirSize(dir); err != nil {
		return f, err
	}
	if f.DirAfter, f.DiskAfter, f.Logs, err = dirUsage(dir); err != nil {
		return f, err
	}
	log("footprint on embedded: %d emails of %d bytes: data directory %d B stopped, %d B without Pebble's log files (%.0f B per email; %d B allocated on disk), log files %d B",
		f.Emails, f.RawBytes, f.DirBefore, f.DirAfter, f.PerEmail(), f.DiskAfter, f.Logs)
	return f, nil
}

// dirSize adds up the sizes of the regular files under dir.
func dirSize(dir string) (int64, error) {
	n, _, logs, err := dirUsage(dir)
	return n + logs, err
}

// dirUsage adds up the sizes of the regular files under dir but Pebble's log
// files (*.log), and the disk blocks allocated to them (a file may be
// sparse), and apart the sizes of the log files.
func dirUsage(dir string) (size, allocated, logs int64, err error) {
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && strings.HasSuffix(d.Name(), ".log") {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			logs += fi.Size()
		} else if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			size += fi.Size()
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				allocated += st.Blocks * 512
			}
		}
		return nil
	})
	return size, allocated, logs, err
}

// prefixMemory returns how many keys start with prefix and the sum of their
// MEMORY USAGE (SAMPLES 0: every element counted), asked in pipelined
// batches.
func prefixMemory(ctx context.Context, c *redis.Client, prefix string) (keys int, bytes int64, err error) {
	var cursor uint64
	for {
		batch, next, err := c.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return keys, bytes, err
		}
		if len(batch) > 0 {
			cmds := make([]*redis.Cmd, len(batch))
			p := c.Pipeline()
			for i, k := range batch {
				cmds[i] = p.Do(ctx, "MEMORY", "USAGE", k, "SAMPLES", "0")
			}
			if _, err := p.Exec(ctx); err != nil && err != redis.Nil {
				return keys, bytes, err
			}
			for _, cmd := range cmds {
				if n, err := cmd.Int64(); err == nil {
					bytes += n
					keys++
				}
			}
		}
		if cursor = next; cursor == 0 {
			return keys, bytes, nil
		}
	}
}

// FsyncResult is the disk's fsync ceiling: how many writes of 4 KiB each
// followed by fdatasync one writer gets through per second, appending to a
// file or, Overwrite, writing over a zero-filled one as the embedded store's
// log does.
type FsyncResult struct {
	Path      string // the directory the file was in
	FS        string // `df -T` of it: device, type, mount
	Overwrite bool
	Writes    int
	Size      int
	Elapsed   time.Duration
	Latency   Latencies
}

// PerSecond returns fdatasyncs per second.
func (f *FsyncResult) PerSecond() float64 {
	if f.Elapsed <= 0 {
		return 0
	}
	return float64(f.Writes) / f.Elapsed.Seconds()
}

// MeasureFsync writes size bytes to a new file in dir and calls fdatasync,
// n times or until limit has passed (at least one), and removes the file.
// With overwrite the file is first filled with n*size zero bytes and synced,
// and the writes go over them: the file's size does not change, as in the
// embedded store's log, whose writes answer 250s (several messages share
// one); otherwise each write appends.
func MeasureFsync(ctx context.Context, dir string, n, size int, limit time.Duration, overwrite bool) (*FsyncResult, error) {
	f, err := os.CreateTemp(dir, "fsync-probe-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	res := &FsyncResult{Path: dir, Size: size, Overwrite: overwrite}
	if overwrite {
		if err := f.Truncate(0); err != nil {
			return nil, err
		}
		zeros := make([]byte, size)
		for range n {
			if _, err := f.Write(zeros); err != nil {
				return nil, err
			}
		}
		if err := fdatasync(f); err != nil {
			return nil, err
		}
		if _, err := f.Seek(0, 0); err != nil {
			return nil, err
		}
	}
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	start := time.Now()
	for i := 0; i < n && (i == 0 || time.Since(start) < limit); i++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		t0 := time.Now()
		if _, err := f.Write(buf); err != nil {
			return res, err
		}
		if err := fdatasync(f); err != nil {
			return res, err
		}
		res.Latency = append(res.Latency, time.Since(t0))
		res.Writes++
	}
	res.Elapsed = time.Since(start)
	res.FS = filesystem(commandOutput("df", "-T", dir))
	return res, nil
}

// filesystem returns "device, type, mounted on" from the output of
// `df -T DIR`, or the output as it is when it is not df's table.
func filesystem(df string) string {
	lines := strings.Split(strings.TrimSpace(df), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(lines) < 2 || len(f) < 7 {
		return df
	}
	return fmt.Sprintf("%s, %s, mounted on %s", f[0], f[1], f[len(f)-1])
}

// Summary is one line of the measurement.
func (f *FsyncResult) Summary() string {
	what := "appends"
	if f.Overwrite {
		what = "writes over zeros"
	}
	return fmt.Sprintf("%s fdatasyncs/s (%d %s of %d B + fdatasync in %s; p50 %s, p99 %s) in %s (%s)",
		strconv.FormatFloat(f.PerSecond(), 'f', 0, 64), f.Writes, what, f.Size, f.Elapsed.Round(time.Millisecond),
		fmtDur(f.Latency.Percentile(50)), fmtDur(f.Latency.Percentile(99)), f.Path, f.FS)
}
