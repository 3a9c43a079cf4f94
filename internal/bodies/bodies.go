// Package bodies reads the content of stored emails for every reader in
// mailsink: the API's detail, raw source, attachments, links, codes and
// transcript, the dashboard's preview and downloads, and any reader added
// later. It loads the raw source from the store, parses it at most once at a
// time (readers of one email wait for the same parse), keeps what parsing
// adds in a cache bounded in bytes, and holds every read to a share of one
// process-wide memory budget, so that no stored message, however hostile,
// can make reads exhaust memory (docs/operations.md, "Limits").
//
// A reader opens a Read, uses it, and closes it; the budget it holds is
// given back at Close.
package bodies

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mailsink/mailsink/internal/gate"
	"github.com/mailsink/mailsink/internal/mailparse"
	"github.com/mailsink/mailsink/store"
)

// Store is what the service reads: an email's record, then its body.
type Store interface {
	// GetEmail returns the email with id in the account, or an error with
	// code NotFound.
	GetEmail(ctx context.Context, accountID, id string) (*store.Email, error)
	// GetBody returns the stored body of that email, or an error with
	// code NotFound.
	GetBody(ctx context.Context, accountID, id string) (*store.Body, error)
}

// Defaults of Config's zero fields.
const (
	DefaultBudget     = 256 << 20
	DefaultWait       = 5 * time.Second
	DefaultCacheBytes = 64 << 20
)

// What a read is charged against the budget, per byte of the raw source:
// loading it (the store's copy and its decompression), and parsing it (the
// decoded parts, up to three bytes of text for each byte that is not UTF-8,
// and go-message's buffers). They are estimates: make bench-reads
// (docs/benchmarks.md) reads hostile messages at the size limit, eight at
// once, and checks the process's peak RSS.
const (
	loadFactor  = 2
	parseFactor = 5
	// baseCost is charged to every read, however small its email.
	baseCost = 16 << 10
)

// Config holds the bounds and instruments of a Service.
type Config struct {
	// Budget is how many bytes reads may hold at once in the whole
	// process: raw sources loaded, parses and large encodings (an
	// estimate: see loadFactor). One account may hold half of it. 0 means
	// DefaultBudget.
	Budget int64
	// Wait is how long a read waits for its share of the budget before it
	// fails with code Busy; 0 means DefaultWait.
	Wait time.Duration
	// CacheBytes bounds the parsed content kept between reads (an
	// estimate of its size); 0 means DefaultCacheBytes, a negative value
	// keeps nothing.
	CacheBytes int64
	// ParsePanics counts parser panics (nil: not counted); Log logs them.
	ParsePanics prometheus.Counter
	Log         *slog.Logger
}

// Service reads emails' bodies. It is safe for concurrent use.
type Service struct {
	store  Store
	cfg    Config
	budget *gate.Budget
	// parse and parseText are mailparse's ParseContext and ParseText;
	// tests replace them.
	parse, parseText func(ctx context.Context, raw []byte) (*mailparse.Message, error)

	mu      sync.Mutex
	cache   *lru
	flights map[string]*flight // parses under way, by cache key
}

// New returns a Service reading from s.
func New(s Store, cfg Config) *Service {
	if cfg.Budget <= 0 {
		cfg.Budget = DefaultBudget
	}
	if cfg.Wait <= 0 {
		cfg.Wait = DefaultWait
	}
	if cfg.CacheBytes == 0 {
		cfg.CacheBytes = DefaultCacheBytes
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Service{
		store:     s,
		cfg:       cfg,
		budget:    gate.NewBudget(cfg.Budget, cfg.Budget/2), // see share
		parse:     mailparse.ParseContext,
		parseText: mailparse.ParseText,
		cache:     newLRU(cfg.CacheBytes),
		flights:   map[string]*flight{},
	}
}

// Body is an email's content. A parsed Body is shared with other readers
// and the cache: its maps and slices must not be changed.
type Body struct {
	// Raw is the source as received, byte-exact.
	Raw []byte
	// Text, HTML, Headers and Attachments are what parsing finds (package
	// mailparse), or what a create request gave; nil and empty in a Body
	// that was not parsed.
	Text        *string
	HTML        *string
	Headers     map[string]string
	Attachments []store.Attachment
	// Cut says what parsing left out because of its limits.
	Cut mailparse.Cut
	// Transcript is the SMTP transaction that delivered the email, nil
	// for email that came another way.
	Transcript *store.Transcript
}

// Read is one reader's use of an email's content, holding its share of the
// budget until Close.
type Read struct {
	Email *store.Email
	Body  *Body

	s         *Service
	accountID string
	mu        sync.Mutex
	held      int64 // bytes of the budget the read holds
	releases  []func()
}

// Grow takes n more bytes of the budget for the read, for an encoding it
// builds in memory (the preview's inline images, say), waiting as Open
// does. A read holds at most an account's share of the budget in all, so
// that a read alone always gets through: past it, Grow takes nothing. It
// returns an error with code Busy when the budget has no room within the
// wait.
func (r *Read) Grow(ctx context.Context, n int64) error {
	r.mu.Lock()
	n = min(n, r.s.share()-r.held)
	r.mu.Unlock()
	if n <= 0 {
		return nil
	}
	release, err := r.s.acquire(ctx, r.accountID, n)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.held += n
	r.releases = append(r.releases, release)
	r.mu.Unlock()
	return nil
}

// Close gives back what the read holds of the budget. The Body must not
// be used afterwards. Calls after the first do nothing.
func (r *Read) Close() {
	r.mu.Lock()
	releases := r.releases
	r.releases = nil
	r.mu.Unlock()
	for _, release := range releases {
		release()
	}
}

// Raw opens the email with id in the account with its raw source and
// transcript, without parsing it. It returns an error with code NotFound
// when there is no such email, Busy when the budget has no room for it
// within the wait, and the store's errors.
func (s *Service) Raw(ctx context.Context, accountID, id string) (*Read, error) {
	return s.open(ctx, accountID, id, false)
}

// Parsed opens the email with id in the account parsed: its Body has the
// raw source and what parsing it finds. Its errors are those of Raw, and
// ctx's when ctx ends during the parse.
func (s *Service) Parsed(ctx context.Context, accountID, id string) (*Read, error) {
	return s.open(ctx, accountID, id, true)
}

// ParsedText is Parsed for a reader of the text and the header alone
// (search's digest) that holds the email's raw source already (it has just
// stored it, as received: no parts given by a create request). Neither the
// email nor its body is read from the store, and the Read's Email is nil.
// raw is parsed under the budget as Parsed does, but the attachments'
// content is not decoded, so their Size is 0 (mailparse.ParseText), and the
// parse is not kept in the cache, as such a reader reads each email once (a
// parse the cache holds already is used). Decoding the attachments was half
// the CPU of an ingest of 100 KB messages with one. Its errors are Busy and
// ctx's.
func (s *Service) ParsedText(ctx context.Context, accountID, id string, raw []byte) (*Read, error) {
	s.mu.Lock()
	p, cached := s.cache.peek(accountID + "/" + id)
	s.mu.Unlock()
	cost := baseCost + loadFactor*int64(len(raw))
	if !cached {
		cost += parseFactor * int64(len(raw))
	}
	r := &Read{s: s, accountID: accountID}
	if err := r.Grow(ctx, cost); err != nil {
		return nil, err
	}
	if !cached {
		var err error
		if p, err = s.parseWith(ctx, s.parseText, raw); err != nil {
			r.Close()
			return nil, err
		}
	}
	r.Body = &Body{Raw: raw, Text: p.Text, HTML: p.HTML, Headers: p.Headers, Attachments: p.Attachments, Cut: p.Cut}
	return r, nil
}

func (s *Service) open(ctx context.Context, accountID, id string, parsed bool) (_ *Read, err error) {
	e, err := s.store.GetEmail(ctx, accountID, id)
	if err != nil {
		return nil, err
	}
	key := accountID + "/" + id
	cost := baseCost + loadFactor*e.RawSize
	if parsed && !s.cached(key) {
		cost += parseFactor * e.RawSize
	}
	r := &Read{Email: e, s: s, accountID: accountID}
	if err := r.Grow(ctx, cost); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	b, err := s.store.GetBody(ctx, accountID, id)
	if err != nil {
		return nil, err
	}
	r.Body = &Body{Raw: b.Raw, Transcript: b.Transcript}
	if !parsed {
		return r, nil
	}
	if g := b.Given; g != nil {
		// A create request gave the parts (or an earlier release stored
		// them parsed): they are shown as given.
		r.Body.Text, r.Body.HTML, r.Body.Headers, r.Body.Attachments = g.Text, g.HTML, g.Headers, g.Attachments
		if r.Body.Headers == nil {
			r.Body.Headers = map[string]string{}
		}
		if r.Body.Attachments == nil {
			r.Body.Attachments = []store.Attachment{}
		}
		return r, nil
	}
	p, err := s.parsed(ctx, key, b.Raw)
	if err != nil {
		return nil, err
	}
	r.Body.Text, r.Body.HTML, r.Body.Headers, r.Body.Attachments, r.Body.Cut = p.Text, p.HTML, p.Headers, p.Attachments, p.Cut
	return r, nil
}

// acquire takes n bytes of the budget for the account, waiting at most
// cfg.Wait.
func (s *Service) acquire(ctx context.Context, accountID string, n int64) (func(), error) {
	wctx, cancel := context.WithTimeout(ctx, s.cfg.Wait)
	defer cancel()
	release, err := s.budget.Acquire(wctx, n, accountID)
	switch {
	case err == nil:
		return release, nil
	case ctx.Err() != nil:
		return nil, store.Wrap(store.Unavailable, ctx.Err(), "the request ended before it could read the email")
	}
	return nil, store.Errorf(store.Busy, "too many large emails are being read at once: try again in a moment")
}

// share is how many bytes of the budget one account may hold.
func (s *Service) share() int64 { return s.cfg.Budget / 2 }

// Used returns the bytes of the budget held now.
func (s *Service) Used() int64 { return s.budget.Used() }

func (s *Service) cached(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.cache.peek(key)
	return ok
}

// parsedBody is what parsing a raw source adds to it.
type parsedBody struct {
	Text        *string
	HTML        *string
	Headers     map[string]string
	Attachments []store.Attachment
	Cut         mailparse.Cut
}

// flight is a parse under way, which every reader of its email waits for.
type flight struct {
	done    chan struct{}
	body    *parsedBody
	err     error
	waiters int
	cancel  context.CancelFunc
}

// parsed returns raw parsed, from the cache, or from the parse of it under
// way, or from a new parse. The parse goes on while any reader waits for
// it, and stops when the last one has gone.
func (s *Service) parsed(ctx context.Context, key string, raw []byte) (*parsedBody, error) {
	s.mu.Lock()
	if p, ok := s.cache.get(key); ok {
		s.mu.Unlock()
		return p, nil
	}
	f, ok := s.flights[key]
	if !ok {
		pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		f = &flight{done: make(chan struct{}), cancel: cancel}
		s.flights[key] = f
		go s.run(pctx, key, raw, f)
	}
	f.waiters++
	s.mu.Unlock()
	select {
	case <-f.done:
		return f.body, f.err
	case <-ctx.Done():
		s.mu.Lock()
		if f.waiters--; f.waiters == 0 {
			// Nobody waits: the parse stops, and a reader that comes
			// later starts another.
			f.cancel()
			if s.flights[key] == f {
				delete(s.flights, key)
			}
		}
		s.mu.Unlock()
		return nil, store.Wrap(store.Unavailable, ctx.Err(), "the request ended before the email was parsed")
	}
}

// run parses raw for f and caches the result.
func (s *Service) run(ctx context.Context, key string, raw []byte, f *flight) {
	defer f.cancel()
	p, err := s.parseWith(ctx, s.parse, raw)
	s.mu.Lock()
	if s.flights[key] == f {
		delete(s.flights, key)
	}
	if p != nil {
		s.cache.add(key, p)
	}
	f.body, f.err = p, err
	s.mu.Unlock()
	close(f.done)
}

// parseWith parses raw with parse. A panic of the parser is logged and
// counted, and what was parsed until then is the result.
func (s *Service) parseWith(ctx context.Context, parse func(context.Context, []byte) (*mailparse.Message, error), raw []byte) (*parsedBody, error) {
	msg, err := parse(ctx, raw)
	switch {
	case errors.Is(err, mailparse.ErrPanic):
		// What was parsed is shown; the panic is a bug to fix.
		if s.cfg.ParsePanics != nil {
			s.cfg.ParsePanics.Inc()
		}
		s.cfg.Log.Error("the parser panicked: the message is shown with what was parsed", "bytes", len(raw))
	case err != nil:
		return nil, store.Wrap(store.Unavailable, err, "the request ended before the email was parsed")
	}
	return &parsedBody{Text: msg.Body.Text, HTML: msg.Body.HTML, Headers: msg.Body.Headers, Cut: msg.Body.Cut,
		Attachments: Attachments(msg.Body.Attachments)}, nil
}

// Attachments converts the parser's attachments into the store's.
func Attachments(in []mailparse.Attachment) []store.Attachment {
	out := make([]store.Attachment, len(in))
	for i, a := range in {
		out[i] = store.Attachment(a)
	}
	return out
}
