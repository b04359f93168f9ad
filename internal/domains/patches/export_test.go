package patches

import (
	"context"
	"database/sql"
)

// SetHold replaces what says which devices a maintenance window keeps from package changes.
func (s *Service) SetHold(h func(ctx context.Context, tx *sql.Tx, deviceIDs []string) (map[string]bool, error)) {
	s.hold = h
}

// SettleJobs is settleJobs, for tests that finish a job from several callers at once.
func (s *Service) SettleJobs(ctx context.Context, ids []string) error { return s.settleJobs(ctx, ids) }
