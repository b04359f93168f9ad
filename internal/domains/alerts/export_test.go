package alerts

import (
	"context"
	"database/sql"
)

// SetHold replaces what tells which devices a maintenance window keeps alerts from.
func (s *Service) SetHold(h func(ctx context.Context, tx *sql.Tx, deviceIDs []string) (map[string]bool, error)) {
	s.hold = h
}
