package security

import "context"

// ScanForPolicy runs the scheduled scan of the policy with ID id for day, as a node that found
// it due does.
func (s *Service) ScanForPolicy(ctx context.Context, id, day string) error {
	ps, err := s.db.QueryContext(ctx, `SELECT `+policyColumns+` FROM security_policies p WHERE p.id = $1`, id)
	if err != nil {
		return err
	}
	defer ps.Close()
	ps.Next()
	p, err := scanPolicy(ps)
	if err != nil {
		return err
	}
	ps.Close()
	return s.scheduledScan(systemCtx(ctx), p, day)
}
