package pebblestore

import (
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
)

// pebbleLogger sends Pebble's log lines to the structured logger: its
// routine news (recovery, file deletions) at debug level, its errors at
// error level.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf is Pebble's word that it cannot go on (its commit pipeline broke,
// its files are corrupt): it must not return, so it panics after logging.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.log.Error(msg, "component", "pebble")
	panic("pebble: " + msg)
}

// eventListener logs the events of Pebble that an operator should see:
// background errors, slow disks, stalled writes, low disk space.
func eventListener(log *slog.Logger) *pebble.EventListener {
	log = log.With("component", "pebble")
	return &pebble.EventListener{
		BackgroundError: func(err error) { log.Error("background error", "err", err) },
		DiskSlow:        func(i pebble.DiskSlowInfo) { log.Warn("disk slow", "info", i.String()) },
		WriteStallBegin: func(i pebble.WriteStallBeginInfo) { log.Warn("writes stalled", "info", i.String()) },
		WriteStallEnd:   func() { log.Info("writes resumed") },
		LowDiskSpace:    func(i pebble.LowDiskSpaceInfo) { log.Warn("low disk space", "info", i.String()) },
		DataCorruption:  func(i pebble.DataCorruptionInfo) { log.Error("data corruption", "info", i.String()) },
	}
}
