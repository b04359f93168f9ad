package automations

// SetMaintenance replaces the maintenance windows automations honour, on a running server.
func (s *Service) SetMaintenance(m MaintenanceWindows) { s.maintenance = m }
