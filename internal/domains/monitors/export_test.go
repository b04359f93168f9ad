package monitors

import (
	"context"
	"database/sql"

	"gale/internal/wire/agentproto"
)

// IngestBatch stores the results a device's agent reported for its monitor_checks, in tx.
func (s *Service) IngestBatch(ctx context.Context, tx *sql.Tx, deviceID string, results []agentproto.MonitorCheckResult) error {
	return s.ingestBatch(ctx, tx, deviceID, results)
}
