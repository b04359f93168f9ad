package auth

import (
	"slices"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/store"
)

// principalCache remembers for a short while (AUTH_CACHE_MS) the principal an access token
// resolved to, so that a client sending requests back to back costs one database read of its
// user, role and session per while rather than one per request. What may change a principal
// (a sign-out, a role's permissions, a user's status or organizations, a deleted partner)
// is a write: every write made through the API makes every node forget all cached principals
// once it has committed (app.Wrote). A change made beside the API, or a notification between
// nodes that was lost, is seen within the while at most. Principals go in and out as copies,
// as handlers may change theirs.
type principalCache struct {
	*store.ShortCache[access.Principal]
}

// maxCachedPrincipals bounds the memory: past it the cache starts over.
const maxCachedPrincipals = 10_000

func newPrincipalCache(ttl time.Duration) principalCache {
	return principalCache{store.NewShortCache[access.Principal](ttl, maxCachedPrincipals)}
}

// get returns a copy of the principal cached for token, if it is still good.
func (c principalCache) get(token string, now time.Time) (*access.Principal, bool) {
	p, ok := c.Get(token, now)
	if !ok {
		return nil, false
	}
	return clonePrincipal(p), true
}

// put caches a copy of p for token (see store.ShortCache.Put for generation).
func (c principalCache) put(token string, p *access.Principal, generation uint64, now time.Time) {
	c.Put(token, *clonePrincipal(*p), generation, now)
}

func clonePrincipal(p access.Principal) *access.Principal {
	p.Permissions, p.Scope.OrgIDs = slices.Clone(p.Permissions), slices.Clone(p.Scope.OrgIDs)
	return &p
}

// ForgetPrincipals drops every principal this node cached: who may do what may have
// changed (see app.Wrote).
func (s *Service) ForgetPrincipals() { s.principals.Forget() }
