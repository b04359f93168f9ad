package auth

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"gale/internal/access"
)

// principalCache remembers for a short while (AUTH_CACHE_MS) the principal an access token
// resolved to, so that a client sending requests back to back costs one database read of its
// user, role and session per while rather than one per request. What may change a principal
// (a sign-out, a role's permissions, a user's status or organizations, a deleted partner)
// is a write: every write made through the API makes every node forget all cached principals
// once it has committed (app.Wrote). A change made beside the API, or a notification between
// nodes that was lost, is seen within the while at most.
type principalCache struct {
	ttl time.Duration
	// generation counts forgettings: an entry is good only in the generation it was read in.
	generation atomic.Uint64
	mu         sync.RWMutex
	entries    map[string]cachedPrincipal
}

type cachedPrincipal struct {
	p          access.Principal
	generation uint64
	until      time.Time
}

// maxCachedPrincipals bounds the memory: past it the cache starts over.
const maxCachedPrincipals = 10_000

// get returns a copy of the principal cached for token, if it is still good.
func (c *principalCache) get(token string, now time.Time) (*access.Principal, bool) {
	if c.ttl <= 0 {
		return nil, false
	}
	c.mu.RLock()
	e, ok := c.entries[token]
	c.mu.RUnlock()
	if !ok || e.generation != c.generation.Load() || !now.Before(e.until) {
		return nil, false
	}
	p := e.p
	p.Permissions, p.Scope.OrgIDs = slices.Clone(p.Permissions), slices.Clone(p.Scope.OrgIDs)
	return &p, true
}

// put caches p for token. generation is the one current before p was read from the
// database: when something was forgotten since, p may predate that change and is not kept.
func (c *principalCache) put(token string, p *access.Principal, generation uint64, now time.Time) {
	if c.ttl <= 0 {
		return
	}
	e := cachedPrincipal{p: *p, generation: generation, until: now.Add(c.ttl)}
	e.p.Permissions, e.p.Scope.OrgIDs = slices.Clone(p.Permissions), slices.Clone(p.Scope.OrgIDs)
	c.mu.Lock()
	defer c.mu.Unlock()
	if generation != c.generation.Load() {
		return
	}
	if c.entries == nil || len(c.entries) >= maxCachedPrincipals {
		c.entries = make(map[string]cachedPrincipal)
	}
	c.entries[token] = e
}

func (c *principalCache) forget() { c.generation.Add(1) }

// ForgetPrincipals drops every principal this node cached: who may do what may have
// changed (see app.Wrote).
func (s *Service) ForgetPrincipals() { s.principals.forget() }
