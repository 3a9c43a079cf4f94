package bodies

import "container/list"

// lru keeps parsed bodies, least recently used first out, within a bound
// on their estimated size. It is not safe for concurrent use.
type lru struct {
	max, size int64
	order     *list.List // of *lruEntry, most recent first
	entries   map[string]*list.Element
}

type lruEntry struct {
	key  string
	body *parsedBody
	size int64
}

func newLRU(maxBytes int64) *lru {
	return &lru{max: maxBytes, order: list.New(), entries: map[string]*list.Element{}}
}

// get returns the body under key and makes it the most recently used.
func (c *lru) get(key string) (*parsedBody, bool) {
	el, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*lruEntry).body, true
}

// peek returns the body under key without changing the order.
func (c *lru) peek(key string) (*parsedBody, bool) {
	el, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	return el.Value.(*lruEntry).body, true
}

// add keeps body under key, dropping the least recently used entries to
// stay within the bound; a body larger than the bound is not kept.
func (c *lru) add(key string, body *parsedBody) {
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
func parsedSize(key string, b *parsedBody) int64 {
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
