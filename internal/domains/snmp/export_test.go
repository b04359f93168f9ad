package snmp

import (
	"context"
	"time"
)

// ClaimDue exposes the dispatcher's claim to the tests: the IDs claimed.
func (s *Service) ClaimDue(ctx context.Context, now time.Time) ([]string, error) {
	ds, err := s.claimDue(ctx, now)
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	return ids, err
}
