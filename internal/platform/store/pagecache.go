package store

import (
	"strconv"
	"strings"
	"time"
)

// PageCache keeps, for a short while, which rows (IDs and versions) made each page of a
// cached list, by the page's statement and arguments: a page asked for again reads nothing
// from the database, its rows coming from the list's RowCache. The scope and filters of a
// page are still the database's, as the key holds all of them. What a PageCache gives up is
// the database's word on every request: a page is kept until Forget, which every write
// through the API calls on every node (see app.Wrote), or for its ttl at most, so that a
// change made beside the API shows within the ttl. Only lists whose rows change through the
// API alone may use one (organizations do; devices change with every heartbeat and do not).
type PageCache = ShortCache[[]rowRef]

// rowRef is a row of a page: its ID and version.
type rowRef struct {
	id      string
	version int64
}

// maxCachedPages bounds the memory: past it the cache starts over.
const maxCachedPages = 10_000

// NewPageCache returns a cache keeping pages for ttl, or nil (no cache) when ttl is 0.
func NewPageCache(ttl time.Duration) *PageCache { return NewShortCache[[]rowRef](ttl, maxCachedPages) }

// pageKey is a page's statement and arguments as one string, or false when an argument is of
// a type it does not spell out unambiguously.
func pageKey(query string, args []any) (string, bool) {
	var b strings.Builder
	b.WriteString(query)
	for _, a := range args {
		b.WriteByte(0)
		switch v := a.(type) {
		case string:
			b.WriteByte('s')
			b.WriteString(v)
		case int:
			b.WriteByte('i')
			b.WriteString(strconv.Itoa(v))
		case int64:
			b.WriteByte('i')
			b.WriteString(strconv.FormatInt(v, 10))
		case bool:
			b.WriteByte('b')
			b.WriteString(strconv.FormatBool(v))
		case time.Time:
			b.WriteByte('t')
			b.WriteString(v.UTC().Format(time.RFC3339Nano))
		default:
			return "", false
		}
	}
	return b.String(), true
}
