package store

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gale/internal/platform/apperr"
)

// Args collects the arguments of a query built piece by piece and hands out their
// placeholders, so dynamic WHERE clauses never splice values into SQL.
type Args struct{ vals []any }

// Add appends v and returns its placeholder ($n).
func (a *Args) Add(v any) string {
	a.vals = append(a.vals, v)
	return "$" + strconv.Itoa(len(a.vals))
}

// In appends every value and returns "($i, $j, ...)"; an empty list renders a clause that
// matches nothing.
func (a *Args) In(vals []string) string {
	if len(vals) == 0 {
		return "(NULL)"
	}
	ph := make([]string, len(vals))
	for i, v := range vals {
		ph[i] = a.Add(v)
	}
	return "(" + strings.Join(ph, ", ") + ")"
}

// Contains is the condition that one of the text columns cols holds needle, ignoring case:
// "(LOWER(c1) LIKE $n ESCAPE '\' OR ...)". A % or _ in needle stands for itself.
func Contains(a *Args, needle string, cols ...string) string {
	p := a.Add("%" + EscapeLike(strings.ToLower(needle)) + "%")
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = "LOWER(" + c + ") LIKE " + p + ` ESCAPE '\'`
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}

// EscapeLike makes LIKE's wildcards in s stand for themselves (with ESCAPE '\').
func EscapeLike(s string) string {
	return likeEscaper.Replace(s)
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// Values returns the collected arguments.
func (a *Args) Values() []any { return a.vals }

// Where joins conditions with AND; no conditions render TRUE.
func Where(conds []string) string {
	if len(conds) == 0 {
		return "TRUE"
	}
	return strings.Join(conds, " AND ")
}

// EncodeCursor turns the sort key of the last row on a page into an opaque token.
func EncodeCursor(key ...any) string {
	b, err := json.Marshal(key)
	if err != nil {
		panic(fmt.Sprintf("encode cursor: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor reads a token made by EncodeCursor into dst (pointers, in the same order).
// A token that does not decode is the caller's mistake: a 400.
func DecodeCursor(token string, dst ...any) error {
	bad := apperr.Invalid("cursor", "malformed cursor; pass back the cursor of a previous page")
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return bad
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(b, &parts); err != nil || len(parts) != len(dst) {
		return bad
	}
	for i, p := range parts {
		if err := json.Unmarshal(p, dst[i]); err != nil {
			return bad
		}
	}
	return nil
}

// Page is a validated page request: cursor paging, or a legacy page number.
type Page struct {
	Limit  int
	Cursor string
	// Number is the legacy 1-based page number; 0 in cursor mode.
	Number int
}

// Offset is the row offset of a legacy page.
func (p Page) Offset() int {
	if p.Number <= 1 {
		return 0
	}
	return (p.Number - 1) * p.Limit
}

// Changes collects the columns a partial update sets, starting with updated_at. Use SQL()
// after SET, and Args for the placeholders of the WHERE clause that follows.
type Changes struct {
	Args Args
	sets []string
}

// NewChanges starts an update stamped with now.
func NewChanges(now time.Time) *Changes {
	c := &Changes{}
	c.Set("updated_at", now)
	return c
}

// Set adds "col = $n" for v.
func (c *Changes) Set(col string, v any) { c.sets = append(c.sets, col+" = "+c.Args.Add(v)) }

// SQL is the SET list: "updated_at = $1, name = $2, ...".
func (c *Changes) SQL() string { return strings.Join(c.sets, ", ") }

// Assign applies one field of a partial update: a nil v was not sent and leaves *dst as it is.
func Assign[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}
