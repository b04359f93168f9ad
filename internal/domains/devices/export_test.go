package devices

// Seams for tests that plug into a running server what a module would declare.

// SetNotifier replaces the agent channel.
func (s *Service) SetNotifier(n Notifier) { s.notifier = n }

// RegisterCommandKind adds a command kind; a mistake panics.
func (s *Service) RegisterCommandKind(k CommandKind) {
	if err := s.addCommandKind(k); err != nil {
		panic(err)
	}
}
