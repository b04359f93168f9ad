package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// LogEntry is the API view of one audit entry. Empty optional fields are null.
type LogEntry struct {
	ID           string         `json:"id" format:"uuid"`
	OccurredAt   time.Time      `json:"occurredAt"`
	PartnerID    *string        `json:"partnerId" doc:"Null for system-level events."`
	OrgID        *string        `json:"orgId" doc:"Null for partner- and system-level events."`
	Category     string         `json:"category" enum:"change,security"`
	Result       string         `json:"result" enum:"success,failure,denied"`
	ActorType    string         `json:"actorType" enum:"user,api_key,service_principal,system,anonymous"`
	ActorID      *string        `json:"actorId"`
	ActorEmail   *string        `json:"actorEmail"`
	Action       string         `json:"action" doc:"Dotted verb, e.g. organization.create."`
	ResourceType string         `json:"resourceType"`
	ResourceID   *string        `json:"resourceId"`
	ResourceName *string        `json:"resourceName"`
	IP           *string        `json:"ip"`
	UserAgent    *string        `json:"userAgent"`
	RequestID    *string        `json:"requestId" doc:"The X-Request-Id of the request that wrote the entry."`
	Details      map[string]any `json:"details"`
}

// Filters narrow the audit entries a query reads. They are read from the query string of
// GET routes and from the filters object of POST /audit/export; empty fields do not filter.
type Filters struct {
	ActorID      string `query:"actorId" json:"actorId,omitempty" maxLength:"200"`
	ActorType    string `query:"actorType" json:"actorType,omitempty" enum:"user,api_key,service_principal,system,anonymous"`
	Action       string `query:"action" json:"action,omitempty" maxLength:"200" doc:"Exact action, e.g. organization.create."`
	ActionPrefix string `query:"actionPrefix" json:"actionPrefix,omitempty" maxLength:"200" doc:"Actions starting with this, e.g. organization."`
	ResourceType string `query:"resourceType" json:"resourceType,omitempty" maxLength:"100"`
	ResourceID   string `query:"resourceId" json:"resourceId,omitempty" maxLength:"200"`
	Category     string `query:"category" json:"category,omitempty" enum:"change,security"`
	Result       string `query:"result" json:"result,omitempty" enum:"success,failure,denied"`
	OrgID        string `query:"orgId" json:"orgId,omitempty" format:"uuid"`
	From         string `query:"from" json:"from,omitempty" maxLength:"64" doc:"RFC 3339 time; entries at or after it."`
	To           string `query:"to" json:"to,omitempty" maxLength:"64" doc:"RFC 3339 time; entries before it."`
}

// Criteria is a validated query over the audit log: the filters with their times parsed,
// and an optional search text.
type Criteria struct {
	Filters
	// FromTime and ToTime bound occurred_at (from inclusive, to exclusive); zero means open.
	FromTime, ToTime time.Time
	// Search matches action, resource name, type and ID, actor email and request ID,
	// case-insensitively; empty means no search.
	Search string
}

// Criteria validates f: times must be RFC 3339 and from must not be after to.
func (f Filters) Criteria() (Criteria, error) {
	c := Criteria{Filters: f}
	var err error
	if c.FromTime, err = parseTime("from", f.From); err != nil {
		return c, err
	}
	if c.ToTime, err = parseTime("to", f.To); err != nil {
		return c, err
	}
	if !c.FromTime.IsZero() && !c.ToTime.IsZero() && c.FromTime.After(c.ToTime) {
		return c, apperr.Invalid("from", "from is after to")
	}
	return c, nil
}

func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, apperr.Invalid(field, "use an RFC 3339 time like 2026-01-31T08:00:00Z")
	}
	return t.UTC(), nil
}

// conditions renders the scope and the criteria.
func (c Criteria) conditions(s access.Scope, a *store.Args) []string {
	conds := []string{s.TenantFilter(a, "org_id", "partner_id")}
	eq := func(col, v string) {
		if v != "" {
			conds = append(conds, col+" = "+a.Add(v))
		}
	}
	eq("actor_id", c.ActorID)
	eq("actor_type", c.ActorType)
	eq("action", c.Action)
	eq("resource_type", c.ResourceType)
	eq("resource_id", c.ResourceID)
	eq("category", c.Category)
	eq("result", c.Result)
	eq("org_id", c.OrgID)
	if c.ActionPrefix != "" {
		conds = append(conds, `action LIKE `+a.Add(store.EscapeLike(c.ActionPrefix)+"%")+` ESCAPE '\'`)
	}
	if !c.FromTime.IsZero() {
		conds = append(conds, "occurred_at >= "+a.Add(c.FromTime))
	}
	if !c.ToTime.IsZero() {
		conds = append(conds, "occurred_at < "+a.Add(c.ToTime))
	}
	if c.Search != "" {
		conds = append(conds, store.Contains(a, c.Search, "action", "resource_name", "resource_type", "resource_id", "actor_email", "request_id"))
	}
	return conds
}

const entryColumns = `id, occurred_at, partner_id, org_id, category, result, actor_type, actor_id, actor_email,
	action, resource_type, resource_id, resource_name, ip, user_agent, request_id, details`

func scanEntry(row store.Scanner) (LogEntry, error) {
	var e LogEntry
	var partner, org, actorID, actorEmail, resID, resName, ip, ua, reqID sql.NullString
	var details string
	if err := row.Scan(&e.ID, &e.OccurredAt, &partner, &org, &e.Category, &e.Result, &e.ActorType, &actorID,
		&actorEmail, &e.Action, &e.ResourceType, &resID, &resName, &ip, &ua, &reqID, &details); err != nil {
		return e, err
	}
	e.OccurredAt = e.OccurredAt.UTC()
	e.PartnerID, e.OrgID, e.ActorID, e.ActorEmail = store.StringPtr(partner), store.StringPtr(org), store.StringPtr(actorID), store.StringPtr(actorEmail)
	e.ResourceID, e.ResourceName, e.IP, e.UserAgent, e.RequestID = store.StringPtr(resID), store.StringPtr(resName), store.StringPtr(ip), store.StringPtr(ua), store.StringPtr(reqID)
	e.Details = map[string]any{}
	if details != "" {
		_ = json.Unmarshal([]byte(details), &e.Details)
	}
	return e, nil
}

// List returns entries in the caller's scope that match c, newest first. In cursor mode the
// second result is the next page's cursor ("" on the last page); in legacy page mode the
// third is the total.
func (l *Log) List(ctx context.Context, c Criteria, page store.Page) ([]LogEntry, string, *int, error) {
	var a store.Args
	conds := c.conditions(access.ScopeFrom(ctx), &a)
	return store.List(ctx, l.db, store.ListQuery{Columns: entryColumns, From: " FROM audit_logs", Conds: conds,
		Args: &a, SortKey: "id", SortID: "id", Desc: true}, page, scanEntry,
		func(e LogEntry) (string, string) { return e.ID, e.ID })
}

// Get returns one entry in the caller's scope; one outside it is not found.
func (l *Log) Get(ctx context.Context, id string) (LogEntry, error) {
	var a store.Args
	conds := []string{access.ScopeFrom(ctx).TenantFilter(&a, "org_id", "partner_id")}
	return store.ByID(ctx, l.db, "audit entry", `SELECT `+entryColumns+` FROM audit_logs`, "id", id, &a, conds, scanEntry)
}

// batch reads up to limit entries matching c in scope s, newest first, strictly older than
// the entry before (all when empty). Exports page through the log with it.
func (l *Log) batch(ctx context.Context, s access.Scope, c Criteria, before string, limit int) ([]LogEntry, error) {
	var a store.Args
	conds := c.conditions(s, &a)
	if before != "" {
		conds = append(conds, "id < "+a.Add(before))
	}
	return l.query(ctx, `SELECT `+entryColumns+` FROM audit_logs WHERE `+store.Where(conds)+
		` ORDER BY id DESC LIMIT `+a.Add(limit), a.Values()...)
}

func (l *Log) query(ctx context.Context, query string, args ...any) ([]LogEntry, error) {
	out, err := store.QueryAll(ctx, l.db, query, args, scanEntry)
	if err != nil {
		return nil, fmt.Errorf("query audit entries: %w", err)
	}
	return out, nil
}
