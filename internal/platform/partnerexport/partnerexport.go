// Package partnerexport is how a domain declares an export of the partner API
// (GET /partner-api/<name>): what rows it pages through, in what order, under which scope. The
// domain provides an Export to its module's kernel; the partner API registers every declared
// export once all modules are built, and answers the spec's exports that no domain declares
// yet with empty pages. The package sits below both, so neither imports the other.
package partnerexport

import (
	"context"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
)

// Export declares one export whose rows are T.
type Export[T any] struct {
	// Name is the route's last segment: GET /partner-api/<Name>.
	Name                 string
	Scope                access.Perm
	Summary, Description string
	// Fetch reads a page of the caller's partner (access.ScopeFrom(ctx)); nil reads nothing.
	Fetch func(ctx context.Context, sk store.Seek) ([]T, bool, error)
	// Key is a row's sort key: its change time (the updatedSince order) and its IDs.
	Key func(T) (time.Time, []string)
	// ByID keeps ID order with updatedSince too: the rows are never updated, only replaced.
	ByID bool
}

// Declared is an Export of any row type.
type Declared interface {
	// ExportName is the export's Name.
	ExportName() string
	// Register adds the export's route to api; pager does the partner API's part of each page.
	Register(api *httpapi.Server, pager Pager)
}

// Query is the query of every export route.
type Query struct {
	Limit        int    `query:"limit" minimum:"1" doc:"Page size; default 100. A value above 500 is clamped to 500."`
	Cursor       string `query:"cursor" maxLength:"2048" doc:"pagination.cursor of the previous page, unchanged. It is signed: an altered cursor, or one of another export, is 400."`
	UpdatedSince string `query:"updatedSince" maxLength:"64" doc:"RFC 3339 time: only rows changed at or after it, in order of change (see docs/partner-api.md). The cursor carries it, so later pages may omit it."`
}

// RateLimitHeaders are the budget headers of every partner API answer.
type RateLimitHeaders struct {
	Limit     string `header:"X-RateLimit-Limit" doc:"Requests the budget allows per window."`
	Remaining string `header:"X-RateLimit-Remaining" doc:"Requests left in the current window."`
	Reset     string `header:"X-RateLimit-Reset" doc:"When the window ends, in Unix seconds."`
}

// Page is the answer of an export route.
type Page[T any] struct {
	RateLimitHeaders
	Body httpapi.List[T]
}

// Pager is the partner API's part of answering a page: the route, the signed cursor, the
// budget.
type Pager interface {
	Route(name string, scope access.Perm, summary, description string) httpapi.Route
	// Seek turns the query into the page to read.
	Seek(ctx context.Context, name string, byID bool, q *Query) (store.Seek, error)
	// Finish signs the cursor after the last row read (key, when there are more rows) and
	// reads the budget headers.
	Finish(ctx context.Context, name string, byID bool, sk store.Seek, more bool, last time.Time, lastIDs []string) (RateLimitHeaders, httpapi.Pagination, error)
}

// ExportName implements Declared.
func (e Export[T]) ExportName() string { return e.Name }

// Register implements Declared.
func (e Export[T]) Register(api *httpapi.Server, pager Pager) {
	httpapi.Register(api, pager.Route(e.Name, e.Scope, e.Summary, e.Description),
		func(ctx context.Context, in *Query) (*Page[T], error) {
			sk, err := pager.Seek(ctx, e.Name, e.ByID, in)
			if err != nil {
				return nil, err
			}
			rows, more := []T{}, false
			if e.Fetch != nil {
				if rows, more, err = e.Fetch(ctx, sk); err != nil {
					return nil, err
				}
			}
			var last time.Time
			var lastIDs []string
			if more {
				last, lastIDs = e.Key(rows[len(rows)-1])
			}
			rl, page, err := pager.Finish(ctx, e.Name, e.ByID, sk, more, last, lastIDs)
			if err != nil {
				return nil, err
			}
			return &Page[T]{RateLimitHeaders: rl, Body: httpapi.List[T]{Data: rows, Pagination: page}}, nil
		})
}
