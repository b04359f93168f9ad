package scripts

import (
	"context"
	"fmt"

	"gale/internal/platform/access"
	"gale/internal/platform/store"
)

// ExportScripts returns a page of the live scripts of the caller's partner, partner-wide ones
// and those of its live organizations, with their tags, for the partner API: in ID order, or
// with sk.Since those changed since then in (updatedAt, ID) order.
func (s *Service) ExportScripts(ctx context.Context, sk store.Seek) ([]Script, bool, error) {
	var a store.Args
	conds := []string{scriptFilter(access.ScopeFrom(ctx), &a)}
	keys := sk.Keys(&a, &conds, "s.updated_at", "s.id")
	list, more, err := store.SeekPage(ctx, s.db, store.SeekQuery{Columns: scriptColumns, From: scriptFrom, Conds: conds, Args: &a,
		Keys: keys}, sk, scanScript)
	if err != nil {
		return nil, false, fmt.Errorf("export scripts: %w", err)
	}
	return list, more, withTags(ctx, s.db, list)
}
