package customfields

// AddHook adds h as a declared Hook would be, on a running server.
func (s *Service) AddHook(h Hook) { s.hooks = append(s.hooks, h) }
