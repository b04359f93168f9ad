package console

import (
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"gale/internal/domains/audit"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// auditPageSize is the audit log page's size.
const auditPageSize = 50

// auditPage is the audit log: entries newest first, searched and filtered as the API's
// search does.
type auditPage struct {
	Entries          []audit.LogEntry
	Search           string
	Category, Result string
	Next             string
}

func (c *Console) auditLog(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "search-audit"); err != nil {
		return err
	}
	in := r.URL.Query()
	pg := auditPage{Search: strings.TrimSpace(in.Get("q")), Category: in.Get("category"), Result: in.Get("result")}
	switch {
	case utf8.RuneCountInString(pg.Search) > 200:
		return apperr.Invalid("q", "search for at most 200 characters")
	case pg.Category != "" && !slices.Contains([]string{"change", "security"}, pg.Category):
		return apperr.Invalid("category", "change or security")
	case pg.Result != "" && !slices.Contains([]string{"success", "failure", "denied"}, pg.Result):
		return apperr.Invalid("result", "success, failure or denied")
	}
	crit, err := audit.Filters{Category: pg.Category, Result: pg.Result, OrgID: c.currentOrg(r)}.Criteria()
	if err != nil {
		return err
	}
	crit.Search = pg.Search
	entries, next, _, err := c.Audit.List(r.Context(), crit, store.Page{Limit: auditPageSize, Cursor: in.Get("cursor")})
	if err != nil {
		return err
	}
	pg.Entries = entries
	pg.Next = nextPage(r, next)
	return c.render(w, r, http.StatusOK, "audit", "", view{Title: "Audit log", Section: "audit", Data: pg})
}
