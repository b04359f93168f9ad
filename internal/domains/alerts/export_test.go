package alerts

import (
	"context"
	"database/sql"

	"gale/internal/domains/maintenance"
)

// SetHold replaces what tells whether a maintenance window keeps alerts from a subject.
func (s *Service) SetHold(h func(ctx context.Context, tx *sql.Tx, sub maintenance.Subject) (bool, error)) {
	s.hold = h
}
