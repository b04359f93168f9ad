package store

import (
	"sync"
	"sync/atomic"
	"time"
)

// ShortCache keeps values by key for a short while (its ttl), and forgets them all at once on
// Forget: what a write may have changed (see app.Wrote). A value is good only in the
// generation (count of Forget calls) that was current before it was read, so a read that
// raced a write is never kept past it. A nil ShortCache keeps nothing.
type ShortCache[V any] struct {
	ttl        time.Duration
	max        int
	generation atomic.Uint64
	mu         sync.RWMutex
	entries    map[string]shortEntry[V]
}

type shortEntry[V any] struct {
	value      V
	generation uint64
	until      time.Time
}

// NewShortCache returns a cache keeping up to max values for ttl each (past max it starts
// over), or nil when ttl is 0.
func NewShortCache[V any](ttl time.Duration, max int) *ShortCache[V] {
	if ttl <= 0 {
		return nil
	}
	return &ShortCache[V]{ttl: ttl, max: max, entries: make(map[string]shortEntry[V])}
}

// Generation is what Put wants: read it before reading the value to keep.
func (c *ShortCache[V]) Generation() uint64 {
	if c == nil {
		return 0
	}
	return c.generation.Load()
}

// Get returns the value kept under key, if it is still good at now.
func (c *ShortCache[V]) Get(key string, now time.Time) (V, bool) {
	var zero V
	if c == nil {
		return zero, false
	}
	c.mu.RLock()
	e, ok := c.entries[key]
	c.mu.RUnlock()
	if !ok || e.generation != c.generation.Load() || !now.Before(e.until) {
		return zero, false
	}
	return e.value, true
}

// Put keeps v under key from now, read in generation: when something was forgotten since,
// Get never returns it.
func (c *ShortCache[V]) Put(key string, v V, generation uint64, now time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.max {
		c.entries = make(map[string]shortEntry[V])
	}
	c.entries[key] = shortEntry[V]{value: v, generation: generation, until: now.Add(c.ttl)}
}

// Forget drops every value kept so far.
func (c *ShortCache[V]) Forget() {
	if c != nil {
		c.generation.Add(1)
	}
}
