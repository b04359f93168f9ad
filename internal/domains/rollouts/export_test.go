package rollouts

// SetHold replaces what tells which devices a maintenance window holds, on a running server.
func (s *Service) SetHold(h HoldFunc) { s.hold.Store(&h) }
