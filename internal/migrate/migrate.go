// Package migrate moves a data directory written by an earlier release, whose
// embedded store was a bbolt file (mailsink.db) with its write-ahead log
// (mailsink.db.wal.*), to the Pebble store of store/pebblestore. It runs at
// start-up, before the store is opened.
//
// The old store is opened with package boltv4, which replays its log first:
// the log holds acknowledged creates that bbolt does not have yet. Its
// records are written into a new store in a directory of its own
// (store.migrating), which is renamed to the store's directory only once it
// is complete and synced. The old files are left as they are until then, so
// a migration that is killed leaves a directory the earlier release still
// opens, and the next start begins the migration again. Once the new store
// is complete, the old files are moved into MovedDir, where they stay until
// the operator deletes them.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/mailsink/mailsink/internal/migrate/boltv4"
	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/pebblestore"
)

const (
	// OldFile is the earlier release's store file in the data directory;
	// its write-ahead log files are named after it.
	OldFile = "mailsink.db"
	// MovedDir is where the earlier release's files go once the new
	// store is complete.
	MovedDir = "migrated-v4"
	// partialSuffix names the directory a migration under way writes.
	partialSuffix = ".migrating"
)

// Run migrates the earlier release's store in dataDir into the directory
// storeDir (under dataDir) when dataDir holds one, and does nothing
// otherwise. When storeDir exists already, a migration completed but was
// stopped before the old files were moved: Run moves them.
func Run(ctx context.Context, dataDir, storeDir string, log *slog.Logger) error {
	oldPath := filepath.Join(dataDir, OldFile)
	if _, err := os.Stat(oldPath); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	newDir := filepath.Join(dataDir, storeDir)
	if _, err := os.Stat(newDir); err == nil {
		return setAside(dataDir, log)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	log.Info("migrating the earlier release's store to the new one: the old files are kept until it is complete",
		"from", oldPath, "to", newDir)
	start := time.Now()
	// The old store's lock keeps another mailsink out of both stores.
	old, err := boltv4.Open(oldPath)
	if err != nil {
		return fmt.Errorf("open %s: %w", oldPath, err)
	}
	defer old.Close()
	partial := newDir + partialSuffix
	// What a migration that was stopped left.
	if err := os.RemoveAll(partial); err != nil {
		return err
	}
	counted, err := load(ctx, old, partial, log)
	if err != nil {
		return fmt.Errorf("migrate %s to %s: %w", oldPath, partial, err)
	}
	if err := os.Rename(partial, newDir); err != nil {
		return err
	}
	if err := syncDir(dataDir); err != nil {
		return err
	}
	log.Info("migrated the earlier release's store", "emails", counted.emails, "raw_bytes", counted.rawBytes,
		"seconds", time.Since(start).Seconds())
	if err := old.Close(); err != nil {
		return err
	}
	return setAside(dataDir, log)
}

// load copies old into a new store in dir and syncs it.
func load(ctx context.Context, old *boltv4.Store, dir string, log *slog.Logger) (*counter, error) {
	dst, err := pebblestore.Open(dir, pebblestore.WithLogger(log))
	if err != nil {
		return nil, err
	}
	c := &counter{Loader: dst.NewLoader()}
	if err := old.Export(ctx, c); err != nil {
		c.Abandon()
		return nil, errors.Join(err, dst.Close())
	}
	if err := c.Finish(); err != nil {
		return nil, errors.Join(err, dst.Close())
	}
	return c, dst.Close()
}

// counter counts the emails a Loader is given, for the log.
type counter struct {
	*pebblestore.Loader
	emails, rawBytes int64
}

func (c *counter) Email(e *store.Email, bodyID string) error {
	c.emails++
	c.rawBytes += e.RawSize
	return c.Loader.Email(e, bodyID)
}

// setAside moves the earlier release's files into MovedDir.
func setAside(dataDir string, log *slog.Logger) error {
	old, err := filepath.Glob(filepath.Join(dataDir, OldFile+".wal.*"))
	if err != nil {
		return err
	}
	// The log files first: a mailsink.db still in place means there may
	// be more to move.
	old = append(old, filepath.Join(dataDir, OldFile))
	moved := filepath.Join(dataDir, MovedDir)
	if err := os.MkdirAll(moved, 0o755); err != nil {
		return err
	}
	for _, path := range old {
		if err := os.Rename(path, filepath.Join(moved, filepath.Base(path))); err != nil {
			return err
		}
	}
	if err := syncDir(dataDir); err != nil {
		return err
	}
	log.Info("the earlier release's store files are kept: delete them once the new store has served you well",
		"dir", moved)
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
