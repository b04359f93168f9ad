package console

import (
	"slices"
	"strings"
	"sync"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/clock"
)

// summaryTTL bounds how long a cached summary is kept when no change arrives to clear it
// (a notice on the bus can be lost).
const summaryTTL = 30 * time.Second

// summaries caches what the pages count or pick over a whole fleet (devices by status, the
// devices that went offline last, open alerts by severity), per scope and filter: counting
// 100,000 devices for every page view would cost more than the page. Any device or alert
// change heard on the bus clears it, so the pages that refresh on that change count afresh.
type summaries struct {
	clock   clock.Clock
	mu      sync.Mutex
	entries map[string]summary
}

type summary struct {
	value any
	at    time.Time
}

func newSummaries(clk clock.Clock) *summaries {
	return &summaries{clock: clk, entries: map[string]summary{}}
}

// cached returns the value of key for the scope, computing it when absent or stale. Values
// of a key are of one type.
func cached[T any](s *summaries, scope access.Scope, key string, compute func() (T, error)) (T, error) {
	k := scopeKey(scope) + "|" + key
	now := s.clock.Now()
	s.mu.Lock()
	e, ok := s.entries[k]
	s.mu.Unlock()
	if ok && now.Sub(e.at) < summaryTTL {
		return e.value.(T), nil
	}
	v, err := compute()
	if err != nil {
		return v, err
	}
	s.mu.Lock()
	s.entries[k] = summary{value: v, at: now}
	s.mu.Unlock()
	return v, nil
}

// clear forgets every summary.
func (s *summaries) clear() {
	s.mu.Lock()
	clear(s.entries)
	s.mu.Unlock()
}

// scopeKey names what a scope may see: two principals with the same key see the same devices
// and alerts.
func scopeKey(s access.Scope) string {
	key := string(s.Level) + "|" + s.PartnerID + "|" + s.OrgID
	if s.OrgIDs != nil {
		ids := slices.Sorted(slices.Values(s.OrgIDs))
		key += "|" + strings.Join(ids, ",") + "|limited"
	}
	return key
}
