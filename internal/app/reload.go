package app

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"time"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/retention"
)

// ReloadAccounts reads the accounts file again and puts its accounts in
// force (SIGHUP calls it): API keys and domains at once, for requests and
// SMTP sessions that start from then on, and retention from its next round.
// Connections stay open. A file that does not read or parse is refused with
// an error log line, and the accounts in force stay. Without an accounts
// file it does nothing.
func (a *App) ReloadAccounts() error {
	if a.cfg.AccountsFile == "" {
		return nil
	}
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	data, err := os.ReadFile(a.cfg.AccountsFile)
	if err != nil {
		return a.refuse(err)
	}
	a.lastDigest = sha256.Sum256(data)
	return a.apply(data)
}

// apply parses data as the accounts file and puts it in force; a.reloadMu
// is held.
func (a *App) apply(data []byte) error {
	accs, err := config.ParseAccounts(data)
	if err != nil {
		return a.refuse(err)
	}
	a.accounts.Replace(accs)
	a.webhooks.SetPrivateTargets(privateTargets(accs))
	// The old rounds stop before the new ones start, so no two run at
	// once; the shutdown cannot fail on a context without deadline.
	a.retention.Shutdown(context.Background())
	a.retention = retention.New(a.store, retentionConfig(a.cfg, accs, a.metrics, a.log.With("component", "retention")))
	a.retention.Start(a.ctx)
	a.log.Info("accounts file reloaded", "file", a.cfg.AccountsFile, "accounts", len(accs))
	return nil
}

func (a *App) refuse(err error) error {
	err = errors.New("MAILSINK_ACCOUNTS_FILE " + a.cfg.AccountsFile + ": " + err.Error())
	a.log.Error("accounts file refused; the accounts in force stay", "err", err)
	return err
}

// watchAccounts reloads the accounts file whenever its content changes,
// checking every AccountsPollInterval. Comparing content, not modification
// times, also catches Kubernetes' secret rotation, which swaps a symlink.
func (a *App) watchAccounts() {
	ctx, cancel := context.WithCancel(context.Background())
	a.stopWatch, a.watchDone = cancel, make(chan struct{})
	if a.cfg.AccountsFile == "" || a.cfg.AccountsPollInterval == 0 {
		close(a.watchDone)
		return
	}
	if data, err := os.ReadFile(a.cfg.AccountsFile); err == nil {
		a.lastDigest = sha256.Sum256(data)
	}
	go func() {
		defer close(a.watchDone)
		tick := time.NewTicker(a.cfg.AccountsPollInterval)
		defer tick.Stop()
		var lastErr string
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			data, err := os.ReadFile(a.cfg.AccountsFile)
			if err != nil {
				// Mid-rotation the file may be missing for a moment: say
				// so once, and keep the accounts in force.
				if err.Error() != lastErr {
					lastErr = err.Error()
					a.refuse(err)
				}
				continue
			}
			lastErr = ""
			a.reloadMu.Lock()
			if d := sha256.Sum256(data); d != a.lastDigest {
				a.lastDigest = d
				a.apply(data)
			}
			a.reloadMu.Unlock()
		}
	}()
}
