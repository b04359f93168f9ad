package store

import (
	"sync"
	"time"
)

// RowCache keeps decoded rows of one table on this node, each with the row version it was
// read at. A cached list (CachedList) reads only the IDs and versions of its page and
// takes from here the rows whose version is still the database's; the rest it reads in full.
// The database raises a row's version in the transaction of every change (a trigger, so on
// every node and for every statement), so a row that changed is never served from here, and
// the scope and filters of a list are always applied by the database, never by the cache.
//
// Rows are shared between requests: a caller must not change a row a cached list returned.
type RowCache[T any] struct {
	mu   sync.RWMutex
	rows map[string]cachedRow[T]
	max  int
	keep func(T) (T, time.Time)
}

type cachedRow[T any] struct {
	version    int64
	value      T
	validUntil time.Time
}

// NewRowCache returns a cache of at most max rows, or nil (no cache) when max is 0. keep, when
// set, turns a row as read into the row to cache (one that carries its encoding, say) and
// tells until when the row stays right without changing: a view worked out from the time of
// reading (a status that lapses) is read again after it; zero is as long as the version holds.
func NewRowCache[T any](max int, keep func(T) (T, time.Time)) *RowCache[T] {
	if max <= 0 {
		return nil
	}
	return &RowCache[T]{rows: make(map[string]cachedRow[T]), max: max, keep: keep}
}

// get returns the row id at version, if cached and still valid at now.
func (c *RowCache[T]) get(id string, version int64, now time.Time) (T, bool) {
	c.mu.RLock()
	r, ok := c.rows[id]
	c.mu.RUnlock()
	if !ok || r.version != version || (!r.validUntil.IsZero() && !now.Before(r.validUntil)) {
		var zero T
		return zero, false
	}
	return r.value, true
}

// put keeps row id as read at version, and returns the row as kept.
func (c *RowCache[T]) put(id string, version int64, v T) T {
	r := cachedRow[T]{version: version, value: v}
	if c.keep != nil {
		r.value, r.validUntil = c.keep(v)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.rows[id]; !ok && len(c.rows) >= c.max {
		// Make room by dropping an eighth of the rows, whichever the map yields first: any
		// row is as good as another to lose, since a dropped row is only read again.
		drop := max(1, c.max/8)
		for k := range c.rows {
			delete(c.rows, k)
			if drop--; drop == 0 {
				break
			}
		}
	}
	c.rows[id] = r
	return r.value
}

// Len is the number of cached rows.
func (c *RowCache[T]) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.rows)
}
