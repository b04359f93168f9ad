package store

import (
	"context"
	"database/sql"
	"fmt"
)

// Deletion is one DELETE statement of a purge, with its arguments.
type Deletion struct {
	SQL  string
	Args []any
}

// Purge runs the deletions of a purge (what names it in errors) in order, in one transaction,
// and returns how many rows they deleted together: the count the periodic cleanup logs.
func (db *DB) Purge(ctx context.Context, what string, deletions ...Deletion) (int64, error) {
	var total int64
	err := db.Write(ctx, func(tx *sql.Tx) error {
		for _, d := range deletions {
			res, err := tx.ExecContext(ctx, d.SQL, d.Args...)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			total += n
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("purge %s: %w", what, err)
	}
	return total, nil
}
