package incidents

import (
	"context"
	"fmt"
	"strconv"

	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/store"
)

// Feed paging (spec §8).
const (
	FeedDefaultLimit = 25
	FeedMaxLimit     = 100
)

// FeedFilter narrows the feed; every field is optional.
type FeedFilter struct {
	OrgID  string
	Kind   string
	Source string
}

// IncidentFeedPagination is the paging part of the feed's answer.
type IncidentFeedPagination struct {
	Page  int `json:"page"`
	Limit int `json:"limit"`
	Total int `json:"total" doc:"Rows of the feed in the caller's scope that match the filters."`
}

// IncidentFeedPage is one page of the feed.
type IncidentFeedPage struct {
	Data       []IncidentFeedRow      `json:"data"`
	Pagination IncidentFeedPagination `json:"pagination"`
}

// seesFindings reports whether the caller may see finding rows: they need devices:read
// besides the feed's alerts:read.
func seesFindings(ctx context.Context) bool {
	return access.PrincipalFrom(ctx).Can(access.DevicesRead)
}

// rowFilter keeps the rows (alias i) in scope, of live organizations, and leaves findings
// out for a caller without devices:read.
func rowFilter(ctx context.Context, a *store.Args) []string {
	conds := []string{access.ScopeFrom(ctx).OrgFilter(a, "i.org_id", "i.partner_id"), tenancy.LiveOrg("i.org_id")}
	if !seesFindings(ctx) {
		conds = append(conds, "i.kind = "+a.Add(KindTracked))
	}
	return conds
}

// Feed returns a page (1-based) of the feed: tracked incidents and the findings not yet
// promoted, in the caller's scope, p1 first, then newest detection first (then newest ID).
// A caller without devices:read sees tracked incidents only.
func (s *Service) Feed(ctx context.Context, f FeedFilter, page, limit int) (IncidentFeedPage, error) {
	out := IncidentFeedPage{Data: []IncidentFeedRow{}, Pagination: IncidentFeedPagination{Page: page, Limit: limit}}
	var a, ca store.Args
	conds := append(rowFilter(ctx, &a), "i.in_feed = "+a.Add(true))
	// The total comes from the counts the triggers keep, under the same conditions.
	counts := []string{access.ScopeFrom(ctx).OrgFilter(&ca, "c.org_id", "c.partner_id"), tenancy.LiveOrg("c.org_id")}
	if !seesFindings(ctx) {
		counts = append(counts, "c.kind = "+ca.Add(KindTracked))
	}
	if f.OrgID != "" {
		conds = append(conds, "i.org_id = "+a.Add(f.OrgID))
		counts = append(counts, "c.org_id = "+ca.Add(f.OrgID))
	}
	kind := f.Kind
	switch f.Source {
	case SourceNative:
		if kind == KindFinding {
			return out, nil
		}
		kind = KindTracked
	case ProviderA, ProviderB:
		if kind == KindTracked {
			return out, nil
		}
		kind = KindFinding
		conds = append(conds, "i.source = "+a.Add(f.Source))
		counts = append(counts, "c.source = "+ca.Add(f.Source))
	}
	if kind != "" {
		conds = append(conds, "i.kind = "+a.Add(kind))
		counts = append(counts, "c.kind = "+ca.Add(kind))
	}
	where := " FROM incidents i WHERE " + store.Where(conds)
	if err := s.db.QueryRowContext(ctx, "SELECT COALESCE(SUM(c.n), 0) FROM incident_feed_counts c WHERE "+store.Where(counts),
		ca.Values()...).Scan(&out.Pagination.Total); err != nil {
		return out, fmt.Errorf("count the incident feed: %w", err)
	}
	offset := (page - 1) * limit
	if offset >= out.Pagination.Total {
		return out, nil
	}
	// The page's IDs come from the feed index alone (it holds every column the conditions
	// and the order name), skipping offset entries without reading their rows; only the
	// page's rows are read. The limit and offset are written into the text (validated
	// integers), as store.List does: PostgreSQL plans a bound LIMIT generically and worse.
	const order = " ORDER BY i.severity, i.detected_at DESC, i.id DESC"
	data, err := store.QueryAll(ctx, s.db, "SELECT "+feedColumns+" FROM incidents i WHERE i.id IN (SELECT i.id"+where+order+" LIMIT "+
		strconv.Itoa(limit)+" OFFSET "+strconv.Itoa(offset)+")"+order, a.Values(), func(r store.Scanner) (IncidentFeedRow, error) {
		return scanFeedRow(r)
	})
	if err != nil {
		return out, fmt.Errorf("read the incident feed: %w", err)
	}
	out.Data = data
	return out, nil
}
