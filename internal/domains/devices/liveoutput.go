package devices

import (
	"context"
	"database/sql"
	"fmt"
	"unicode/utf8"

	"gale/internal/wire/agentproto"
)

// RecordOutput appends a piece of a running command's output (agentproto.CommandOutput) to
// what the command shows so far, and notes that its process started. Each stream's piece is
// appended only at the offset the stored output has reached, so a piece arrives once and in
// order; a piece that is not text, or would pass the output cap, is not shown live (the final
// result carries the whole output, encoded when it is not text). Pieces for a command that is
// not sent to this agent, or is already final, change nothing.
func (s *Service) RecordOutput(ctx context.Context, a Agent, o agentproto.CommandOutput) error {
	now := s.clock.Now()
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE device_commands SET started_at = $1
			WHERE id = $2 AND device_id = $3 AND status = $4 AND started_at IS NULL`, now, o.CommandID, a.DeviceID, CommandSent); err != nil {
			return err
		}
		for _, p := range []struct {
			column string
			offset int64
			data   []byte
		}{{"stdout", o.StdoutOffset, o.Stdout}, {"stderr", o.StderrOffset, o.Stderr}} {
			if len(p.data) == 0 || !liveText(p.data) || p.offset+int64(len(p.data)) > DefaultOutputBytes {
				continue
			}
			live := p.column + "_live"
			if _, err := tx.ExecContext(ctx, `UPDATE device_commands SET `+p.column+` = COALESCE(`+p.column+`, '') || $1,
				`+live+` = `+live+` + $2
				WHERE id = $3 AND device_id = $4 AND status = $5 AND `+live+` = $6`,
				string(p.data), len(p.data), o.CommandID, a.DeviceID, CommandSent, p.offset); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record output of command %s: %w", o.CommandID, err)
	}
	return nil
}

// liveText tells whether a piece can be shown as it is: UTF-8 without NUL.
func liveText(b []byte) bool {
	for _, c := range b {
		if c == 0 {
			return false
		}
	}
	return utf8.Valid(b)
}
