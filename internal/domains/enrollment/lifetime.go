package enrollment

import (
	"context"
	"fmt"
	"time"

	"gale/internal/domains/tenancy"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Expiry is when a new key of the organization expires. The request names a lifetime with
// ttlMinutes or expiresAt (never both), or neither to get p.DefaultTTL. The limit is the
// smallest of 525600 minutes, the organization's max_enrollment_key_ttl_minutes and p.MaxTTL.
// An explicit lifetime above it is refused (400, naming the limit), since silently shortening
// a key someone asked for leaves them with one that dies early; the default is clamped to it
// silently, since nobody asked for that length.
func (s *Service) Expiry(ctx context.Context, q store.Querier, orgID string, ttlMinutes *int, expiresAt *time.Time, p Policy) (time.Time, error) {
	now := s.clock.Now()
	if ttlMinutes != nil && expiresAt != nil {
		return time.Time{}, apperr.Invalid("expiresAt", "send ttlMinutes or expiresAt, not both")
	}
	limit, limitName := MaxTTLMinutes*time.Minute, "the longest key lifetime"
	orgCap, ok, err := tenancy.EnrollmentKeyTTLCap(ctx, q, orgID)
	if err != nil {
		return time.Time{}, err
	}
	if !ok {
		return time.Time{}, apperr.NotFound("organization")
	}
	if orgCap.Valid && time.Duration(orgCap.Int64)*time.Minute < limit {
		limit, limitName = time.Duration(orgCap.Int64)*time.Minute, "the organization's maxEnrollmentKeyTtlMinutes"
	}
	if p.MaxTTL > 0 && p.MaxTTL < limit {
		limit, limitName = p.MaxTTL, "this API's longest key lifetime"
	}
	tooLong := func(field string) error {
		return apperr.Invalid(field, fmt.Sprintf("at most %d minutes (%s)", int(limit/time.Minute), limitName))
	}
	switch {
	case ttlMinutes != nil:
		if *ttlMinutes < 1 || *ttlMinutes > MaxTTLMinutes {
			return time.Time{}, apperr.Invalid("ttlMinutes", fmt.Sprintf("must be 1 to %d", MaxTTLMinutes))
		}
		ttl := time.Duration(*ttlMinutes) * time.Minute
		if ttl > limit {
			return time.Time{}, tooLong("ttlMinutes")
		}
		return now.Add(ttl), nil
	case expiresAt != nil:
		t := expiresAt.UTC().Truncate(time.Microsecond)
		if !t.After(now) {
			return time.Time{}, apperr.Invalid("expiresAt", "must be in the future")
		}
		if t.Sub(now) > limit {
			return time.Time{}, tooLong("expiresAt")
		}
		return t, nil
	}
	return now.Add(min(p.DefaultTTL, limit)), nil
}
