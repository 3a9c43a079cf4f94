package ingest

import (
	"container/list"
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mailsink/mailsink/mailparse"
	"github.com/mailsink/mailsink/store"
)

// DefaultCacheBytes is how much parsed content Bodies keeps when
// BodiesConfig.CacheBytes is 0.
const DefaultCacheBytes = 64 << 20

// BodiesConfig holds the cache bound and the instruments of Bodies.
type BodiesConfig struct {
	// CacheBytes bounds the parsed content kept in memory (an estimate of
	// its size in bytes); 0 means DefaultCacheBytes, a negative value
	// keeps nothing.
	CacheBytes int64
	// ParsePanics and Log are as in Config.
	ParsePanics prometheus.Counter
	Log         *slog.Logger
}

// Bodies is a store.Store whose GetBody returns a body stored unparsed
// (store.Body.Unparsed, as Deliver stores them) parsed, as if it had been
// parsed before it was stored; other bodies, those stored parsed by an
// earlier release or given by a create request, are returned as stored.
// What it parsed is kept in an LRU cache bounded in bytes, by account and
// email id (an email's body never changes), so that reading an email again
// does not parse it again; the raw is read from the store every time, so a
// deleted email is not found. Parsing never fails a read: should the parser
// panic, the body has what was parsed, and the panic is counted and logged
// as Service does.
type Bodies struct {
	store.Store
	cfg   BodiesConfig
	parse func(raw []byte) (*mailparse.Message, error)

	mu    sync.Mutex
	cache *lru
}

// NewBodies returns s with GetBody parsing unparsed bodies, keeping s's
// store.Notifier and store.Idempotency when it has them.
func NewBodies(s store.Store, cfg BodiesConfig) store.Store {
	if cfg.CacheBytes == 0 {
		cfg.CacheBytes = DefaultCacheBytes
	}
	b := &Bodies{Store: s, cfg: cfg, parse: mailparse.Parse, cache: newLRU(cfg.CacheBytes)}
	n, isNotifier := s.(store.Notifier)
	i, isIdem := s.(store.Idempotency)
	switch {
	case isNotifier && isIdem:
		return &struct {
			*Bodies
			store.Notifier
			store.Idempotency
		}{b, n, i}
	case isNotifier:
		return &struct {
			*Bodies
			store.Notifier
		}{b, n}
	case isIdem:
		return &struct {
			*Bodies
			store.Idempotency
		}{b, i}
	}
	return b
}

// GetBody implements store.Store: it returns the stored body, parsed when
// it was stored unparsed. It returns the store's errors.
func (b *Bodies) GetBody(ctx context.Context, accountID, id string) (*store.Body, error) {
	body, err := b.Store.GetBody(ctx, accountID, id)
	if err != nil || !body.Unparsed {
		return body, err
	}
	key := accountID + "/" + id
	b.mu.Lock()
	p, ok := b.cache.get(key)
	b.mu.Unlock()
	if !ok {
		msg, err := b.parse(body.Raw)
		if err != nil {
			panicked(b.cfg.ParsePanics, b.cfg.Log, len(body.Raw), "the message is shown with what was parsed")
		}
		p = storeBody(&msg.Body)
		p.Raw = nil // the cache holds what parsing adds, not the raw
		b.mu.Lock()
		b.cache.add(key, p)
		b.mu.Unlock()
	}
	// Callers own what they get: the map and slice are copies.
	body.Text, body.HTML = p.Text, p.HTML
	body.Headers = maps.Clone(p.Headers)
	body.Attachments = slices.Clone(p.Attachments)
	body.Unparsed = false
	return body, nil
}

// lru keeps parsed bodies, least recently used first out, within a bound
// on their estimated size. It is not safe for concurrent use.
type lru struct {
	max, size int64
	order     *list.List // of *lruEntry, most recent first
	entries   map[string]*list.Element
}

type lruEntry struct {
	key  string
	body *store.Body
	size int64
}

func newLRU(maxBytes int64) *lru {
	return &lru{max: maxBytes, order: list.New(), entries: map[string]*list.Element{}}
}

func (c *lru) get(key string) (*store.Body, bool) {
	el, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*lruEntry).body, true
}

// add keeps body under key, dropping the least recently used entries to
// stay within the bound; a body larger than the bound is not kept.
func (c *lru) add(key string, body *store.Body) {
	size := parsedSize(key, body)
	if size > c.max {
		return
	}
	if el, ok := c.entries[key]; ok {
		c.size -= el.Value.(*lruEntry).size
		c.order.Remove(el)
	}
	c.entries[key] = c.order.PushFront(&lruEntry{key: key, body: body, size: size})
	c.size += size
	for c.size > c.max {
		el := c.order.Back()
		e := el.Value.(*lruEntry)
		c.order.Remove(el)
		delete(c.entries, e.key)
		c.size -= e.size
	}
}

// parsedSize estimates the memory an entry holds: its strings and a fixed
// allowance for each allocation around them.
func parsedSize(key string, b *store.Body) int64 {
	n := int64(len(key)) + 256
	for _, s := range []*string{b.Text, b.HTML} {
		if s != nil {
			n += int64(len(*s)) + 16
		}
	}
	for k, v := range b.Headers {
		n += int64(len(k)+len(v)) + 48
	}
	for _, a := range b.Attachments {
		n += 128
		for _, s := range []*string{a.ContentID, a.ContentType, a.Disposition, a.Filename} {
			if s != nil {
				n += int64(len(*s))
			}
		}
	}
	return n
}
