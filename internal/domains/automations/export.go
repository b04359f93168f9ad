package automations

import (
	"context"
	"fmt"

	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/store"
)

// ExportAutomations returns a page of the automations of the caller's partner, partner-wide
// ones and those of its live organizations, for the partner API: in ID order, or with sk.Since
// those changed since then in (updatedAt, ID) order.
func (s *Service) ExportAutomations(ctx context.Context, sk store.Seek) ([]Automation, bool, error) {
	var a store.Args
	conds := []string{filter(access.ScopeFrom(ctx), &a), tenancy.LiveOrg("a.org_id")}
	keys := sk.Keys(&a, &conds, "a.updated_at", "a.id")
	list, more, err := store.SeekPage(ctx, s.db, store.SeekQuery{Columns: automationColumns, From: " FROM automations a", Conds: conds,
		Args: &a, Keys: keys}, sk, s.scanAutomation)
	if err != nil {
		return nil, false, fmt.Errorf("export automations: %w", err)
	}
	return list, more, nil
}
