// Package checks runs the checks of one email on demand and keeps their
// results with the email (store.Checks): its HTML against email clients
// (htmlcompat), its links and images (linkcheck), its spam score from
// spamd (spam), and its authentication, DKIM, SPF and DMARC (auth).
//
// Each check reads the message through package bodies, under the read
// budget: the parsed HTML and text parts for the HTML and link checks,
// the raw source for spam and authentication. The checks that reach other
// servers (links, spamd, DNS) take a turn first, at most half of them for
// one account, so that one account's checks cannot hold up the others'. A
// result is kept until the email is deleted; each carries checkedAt, and a
// request with refresh runs the check again. Concurrent requests for the
// same result share one run, which stops when none of them waits.
package checks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/mailsink/mailsink/internal/bodies"
	"github.com/mailsink/mailsink/internal/checks/auth"
	"github.com/mailsink/mailsink/internal/checks/htmlcompat"
	"github.com/mailsink/mailsink/internal/checks/linkcheck"
	"github.com/mailsink/mailsink/internal/checks/resolve"
	"github.com/mailsink/mailsink/internal/checks/spam"
	"github.com/mailsink/mailsink/internal/gate"
	"github.com/mailsink/mailsink/internal/links"
	"github.com/mailsink/mailsink/store"
)

// The checks, by the name of their endpoint and stored result.
const (
	HTML  = "html"
	Links = "links"
	Spam  = "spam"
	Auth  = "auth"
)

// Known reports whether name is a check.
func Known(name string) bool {
	switch name {
	case HTML, Links, Spam, Auth:
		return true
	}
	return false
}

// Reader opens emails' content under the read budget (*bodies.Service).
type Reader interface {
	Raw(ctx context.Context, accountID, id string) (*bodies.Read, error)
	Parsed(ctx context.Context, accountID, id string) (*bodies.Read, error)
}

// Defaults of Config's zero fields.
const (
	DefaultTurns       = 8
	DefaultTurnWait    = 10 * time.Second
	DefaultSpamTimeout = 30 * time.Second
	// maxRun bounds one run of a check, whoever waits for it.
	maxRun = 2 * time.Minute
)

// Config configures the checks.
type Config struct {
	// SpamdAddr is spamd's host:port; empty leaves the spam check
	// unconfigured (Result returns Conflict).
	SpamdAddr   string
	SpamTimeout time.Duration
	// DNSResolver is the DNS server's host:port; empty uses the system's.
	DNSResolver string
	// Links bounds the link check; its LookupHost is set to the checks'
	// resolver when nil.
	Links linkcheck.Config
	// AllowPrivate reports whether an account's link checks may reach
	// private and loopback addresses (webhooks.allowPrivateTargets).
	AllowPrivate func(accountID string) bool
	// Turns bounds the checks that reach other servers at once, half of
	// them for one account; a check waits TurnWait for a turn, then
	// fails with Busy.
	Turns    int
	TurnWait time.Duration
	// StoreTimeout bounds the store calls of one run.
	StoreTimeout time.Duration
	// Now is the clock of checkedAt; nil is time.Now.
	Now func() time.Time
}

// Service runs and keeps the checks. It is safe for concurrent use.
type Service struct {
	cfg    Config
	bodies Reader
	store  store.Checks
	// html is the caniemail data set's checker, parsed at the first HTML
	// check: it is 4 MB of heap that a server whose users never check HTML
	// need not hold.
	html  func() (*htmlcompat.Checker, error)
	links *linkcheck.Checker
	spam  *spam.Client // nil: not configured
	auth  *auth.Checker
	turns *gate.Gate

	mu      sync.Mutex
	flights map[string]*flight
}

// New returns the checks over the emails r reads and the results st
// keeps. It fails only when the bundled HTML data does not parse.
func New(r Reader, st store.Checks, cfg Config) (*Service, error) {
	if cfg.Turns <= 0 {
		cfg.Turns = DefaultTurns
	}
	if cfg.TurnWait <= 0 {
		cfg.TurnWait = DefaultTurnWait
	}
	if cfg.SpamTimeout <= 0 {
		cfg.SpamTimeout = DefaultSpamTimeout
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AllowPrivate == nil {
		cfg.AllowPrivate = func(string) bool { return false }
	}
	res := resolve.New(cfg.DNSResolver, 0)
	if cfg.Links.LookupHost == nil {
		cfg.Links.LookupHost = res.LookupNetIP
	}
	s := &Service{cfg: cfg, bodies: r, store: st, html: sync.OnceValues(htmlcompat.New), links: linkcheck.New(cfg.Links),
		auth: &auth.Checker{Resolver: res}, turns: gate.New(cfg.Turns, max(cfg.Turns/2, 1)),
		flights: map[string]*flight{}}
	if cfg.SpamdAddr != "" {
		s.spam = &spam.Client{Addr: cfg.SpamdAddr, Timeout: cfg.SpamTimeout}
	}
	return s, nil
}

// Result returns the result of check name for the email with id in the
// account, as JSON: the kept one, or, when there is none or refresh is
// set, a new one, which is kept. It returns Conflict for the spam check
// without spamd, NotFound when there is no such email, Upstream when
// spamd fails, Busy when no turn or read budget is free in time, and
// Unavailable when ctx ends first or the store cannot be reached.
func (s *Service) Result(ctx context.Context, accountID, id, name string, refresh bool) ([]byte, error) {
	run, ok := map[string]func(context.Context, string, string) (any, error){
		HTML: s.checkHTML, Links: s.checkLinks, Spam: s.checkSpam, Auth: s.checkAuth,
	}[name]
	if !ok {
		return nil, store.Errorf(store.NotFound, "no check named %q: the checks are html, links, spam and auth", name)
	}
	if name == Spam && s.spam == nil {
		return nil, store.Errorf(store.Conflict, "the spam check is not configured: set MAILSINK_SPAMD_ADDR to the host:port of a SpamAssassin spamd")
	}
	if !refresh {
		sctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
		kept, err := s.store.GetCheck(sctx, accountID, id, name)
		cancel()
		if err == nil {
			return kept, nil
		}
		if !store.IsCode(err, store.NotFound) {
			return nil, err
		}
	}
	return s.shared(ctx, accountID+"/"+id+"/"+name, func(ctx context.Context) ([]byte, error) {
		result, err := run(ctx, accountID, id)
		if err != nil {
			return nil, err
		}
		out, err := json.Marshal(result)
		if err != nil {
			return nil, store.Wrap(store.Internal, err, "encode the check's result")
		}
		sctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
		defer cancel()
		if err := s.store.PutCheck(sctx, accountID, id, name, out); err != nil {
			return nil, err
		}
		return out, nil
	})
}

// checked is a result with the time it was made.
func (s *Service) checked() time.Time { return s.cfg.Now().UTC().Truncate(time.Millisecond) }

// The answers of each check: the check's report and checkedAt.
type (
	htmlAnswer struct {
		*htmlcompat.Report
		CheckedAt time.Time `json:"checkedAt"`
	}
	linksAnswer struct {
		*linkcheck.Report
		CheckedAt time.Time `json:"checkedAt"`
	}
	spamAnswer struct {
		*spam.Report
		CheckedAt time.Time `json:"checkedAt"`
	}
	authAnswer struct {
		*auth.Report
		CheckedAt time.Time `json:"checkedAt"`
	}
)

func (s *Service) checkHTML(ctx context.Context, accountID, id string) (any, error) {
	read, err := s.open(ctx, accountID, id, true)
	if err != nil {
		return nil, err
	}
	defer read.Close()
	doc := deref(read.Body.HTML)
	// The tokenizer copies a tag's attributes while it reads them: at
	// most the document again.
	if err := read.Grow(ctx, int64(len(doc))); err != nil {
		return nil, err
	}
	html, err := s.html()
	if err != nil {
		return nil, err // the bundled data set does not parse: a bug its tests catch
	}
	r, err := html.Check(ctx, doc)
	if err != nil {
		return nil, ended(err)
	}
	return htmlAnswer{r, s.checked()}, nil
}

func (s *Service) checkLinks(ctx context.Context, accountID, id string) (any, error) {
	read, err := s.open(ctx, accountID, id, true)
	if err != nil {
		return nil, err
	}
	targets, err := s.targets(ctx, read)
	read.Close() // the fetches need only the URLs
	if err != nil {
		return nil, err
	}
	release, err := s.turn(ctx, accountID)
	if err != nil {
		return nil, err
	}
	defer release()
	r, err := s.links.Check(ctx, targets, s.cfg.AllowPrivate(accountID))
	if err != nil {
		return nil, ended(err)
	}
	return linksAnswer{r, s.checked()}, nil
}

// targets lists the link check's URLs: the message's http and https
// links (package links), then its images, each once.
func (s *Service) targets(ctx context.Context, read *bodies.Read) ([]linkcheck.Target, error) {
	htmlPart, textPart := deref(read.Body.HTML), deref(read.Body.Text)
	// The URLs hold at most what they were found in.
	if err := read.Grow(ctx, int64(min(len(htmlPart), links.MaxScan)+min(len(textPart), links.MaxScan))); err != nil {
		return nil, err
	}
	found, err := links.Extract(ctx, htmlPart, textPart)
	if err != nil {
		return nil, ended(err)
	}
	images, err := links.Images(ctx, htmlPart)
	if err != nil {
		return nil, ended(err)
	}
	var out []linkcheck.Target
	seen := map[string]bool{}
	add := func(u, kind string) {
		if !seen[u] {
			seen[u] = true
			out = append(out, linkcheck.Target{URL: u, Kind: kind})
		}
	}
	for _, l := range found {
		if !strings.HasPrefix(strings.ToLower(l.URL), "mailto:") {
			add(l.URL, "link")
		}
	}
	for _, u := range images {
		add(u, "image")
	}
	return out, nil
}

func (s *Service) checkSpam(ctx context.Context, accountID, id string) (any, error) {
	read, err := s.open(ctx, accountID, id, false)
	if err != nil {
		return nil, err
	}
	raw := read.Body.Raw
	scored := bytes.Clone(raw[:min(len(raw), spam.MaxBytes)])
	read.Close() // spamd is sent at most MaxBytes: the rest is given back
	release, err := s.turn(ctx, accountID)
	if err != nil {
		return nil, err
	}
	defer release()
	r, err := s.spam.Check(ctx, scored)
	var se *spam.Error
	switch {
	case errors.As(err, &se):
		return nil, store.Wrap(store.Upstream, err, "the spam check failed: "+se.Error())
	case err != nil:
		return nil, ended(err)
	}
	if len(raw) > len(scored) {
		r.Truncated = true
	}
	return spamAnswer{r, s.checked()}, nil
}

func (s *Service) checkAuth(ctx context.Context, accountID, id string) (any, error) {
	read, err := s.open(ctx, accountID, id, false)
	if err != nil {
		return nil, err
	}
	defer read.Close()
	release, err := s.turn(ctx, accountID)
	if err != nil {
		return nil, err
	}
	defer release()
	actx, cancel := context.WithTimeout(ctx, auth.Timeout)
	defer cancel()
	r, err := s.auth.Check(actx, read.Body.Raw, read.Body.Transcript)
	if err != nil {
		return nil, ended(err)
	}
	return authAnswer{r, s.checked()}, nil
}

// open opens the email under the store timeout for its calls.
func (s *Service) open(ctx context.Context, accountID, id string, parsed bool) (*bodies.Read, error) {
	open := s.bodies.Raw
	if parsed {
		open = s.bodies.Parsed
	}
	// The read's store calls are bounded; the read itself lives on.
	sctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	read, err := open(sctx, accountID, id)
	if err != nil && ctx.Err() != nil {
		return nil, ended(ctx.Err())
	}
	return read, err
}

// turn takes a turn for a check that reaches another server.
func (s *Service) turn(ctx context.Context, accountID string) (func(), error) {
	wctx, cancel := context.WithTimeout(ctx, s.cfg.TurnWait)
	defer cancel()
	release, err := s.turns.Acquire(wctx, accountID)
	switch {
	case err == nil:
		return release, nil
	case ctx.Err() != nil:
		return nil, ended(ctx.Err())
	}
	return nil, store.Errorf(store.Busy, "too many checks are running: try again in a moment")
}

// ended is the error of a check whose context ended.
func ended(err error) error {
	return store.Wrap(store.Unavailable, err, "the request ended before the check was done")
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// flight is a run of a check that every request for its result waits for.
type flight struct {
	done    chan struct{}
	result  []byte
	err     error
	waiters int
	cancel  context.CancelFunc
}

// shared runs run for key, or waits for the run under way. The run goes on
// while anyone waits, at most maxRun, and stops when the last one leaves.
func (s *Service) shared(ctx context.Context, key string, run func(context.Context) ([]byte, error)) ([]byte, error) {
	s.mu.Lock()
	f, ok := s.flights[key]
	if !ok {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), maxRun)
		f = &flight{done: make(chan struct{}), cancel: cancel}
		s.flights[key] = f
		go func() {
			defer cancel()
			result, err := run(rctx)
			if err != nil && rctx.Err() != nil && !store.IsCode(err, store.Upstream) {
				err = ended(rctx.Err())
			}
			s.mu.Lock()
			if s.flights[key] == f {
				delete(s.flights, key)
			}
			f.result, f.err = result, err
			s.mu.Unlock()
			close(f.done)
		}()
	}
	f.waiters++
	s.mu.Unlock()
	select {
	case <-f.done:
		return f.result, f.err
	case <-ctx.Done():
		s.mu.Lock()
		if f.waiters--; f.waiters == 0 {
			f.cancel()
			if s.flights[key] == f {
				delete(s.flights, key)
			}
		}
		s.mu.Unlock()
		return nil, ended(ctx.Err())
	}
}
