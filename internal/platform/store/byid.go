package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"gale/internal/platform/apperr"
)

// ByID reads one row with scan: selectFrom ("SELECT <columns> FROM <table> <alias>") where
// idColumn is id and every condition of conds holds (the caller's scope, whose arguments a
// already holds). An id that is not a UUID, or no such row, is apperr.NotFound(noun), so a
// row out of scope looks exactly like a missing one.
func ByID[T any](ctx context.Context, q Querier, noun, selectFrom, idColumn, id string, a *Args, conds []string,
	scan func(Scanner) (T, error)) (T, error) {
	if !ValidID(id) {
		var zero T
		return zero, apperr.NotFound(noun)
	}
	conds = append([]string{idColumn + " = " + a.Add(id)}, conds...)
	v, err := scan(q.QueryRowContext(ctx, selectFrom+" WHERE "+Where(conds), a.Values()...))
	if errors.Is(err, sql.ErrNoRows) {
		return v, apperr.NotFound(noun)
	}
	if err != nil {
		return v, fmt.Errorf("load %s %s: %w", noun, id, err)
	}
	return v, nil
}
