package software

import (
	"context"
	"database/sql"
)

// SetHold replaces what says which devices a maintenance window keeps from installs.
func (s *Service) SetHold(h func(ctx context.Context, tx *sql.Tx, deviceIDs []string) (map[string]bool, error)) {
	s.hold = h
}

// SetWindowActive replaces what tells whether a maintenance window is active now.
func (s *Service) SetWindowActive(active func(ctx context.Context, windowID string) (bool, error)) {
	s.windowActive = active
}
