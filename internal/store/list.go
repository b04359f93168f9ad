package store

import (
	"context"
	"fmt"
	"strconv"

	"gale/internal/apperr"
)

// Scanner is a row to scan: *sql.Row and *sql.Rows.
type Scanner interface{ Scan(dest ...any) error }

// ListQuery is one paged list: the columns and FROM clause, the conditions (with their
// arguments in Args), and the sort column plus a unique ID column that break ties. The cursor
// encodes both values of the last row.
type ListQuery struct {
	Columns string // "a, b, c"
	From    string // " FROM t"
	Conds   []string
	Args    *Args
	SortKey string
	SortID  string
	Desc    bool
	// KeyArg turns the cursor's sort key back into a query argument when the column is not
	// text (a timestamp, say); nil passes the string as it is.
	KeyArg func(string) (any, error)
}

// List runs q in cursor mode, or in legacy page mode (then with the total). It returns the
// rows, the next page's cursor ("" on the last page and in page mode) and the total (page
// mode only). key gives the sort key and ID of a row.
func List[T any](ctx context.Context, db Querier, q ListQuery, page Page, scan func(Scanner) (T, error),
	key func(T) (string, string)) ([]T, string, *int, error) {
	a, conds := q.Args, q.Conds
	cmp, dir := ">", "ASC"
	if q.Desc {
		cmp, dir = "<", "DESC"
	}
	var total *int
	if page.Number > 0 {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) `+q.From+` WHERE `+Where(conds), a.Values()...).Scan(&n); err != nil {
			return nil, "", nil, err
		}
		total = &n
	} else if page.Cursor != "" {
		var k, id string
		if err := DecodeCursor(page.Cursor, &k, &id); err != nil {
			return nil, "", nil, err
		}
		if !ValidID(id) || (q.SortKey == q.SortID && !ValidID(k)) {
			return nil, "", nil, apperr.Invalid("cursor", "malformed cursor; pass back the cursor of a previous page")
		}
		if q.SortKey == q.SortID {
			conds = append(conds, fmt.Sprintf("%s %s %s", q.SortID, cmp, a.Add(id)))
		} else {
			var karg any = k
			if q.KeyArg != nil {
				v, err := q.KeyArg(k)
				if err != nil {
					return nil, "", nil, apperr.Invalid("cursor", "malformed cursor; pass back the cursor of a previous page")
				}
				karg = v
			}
			// The row-value comparison alone is the condition; the bound on the key before it lets
			// SQLite range over an index whose key is an expression (it ranges row values only
			// over plain columns). PostgreSQL ranges over both.
			key := a.Add(karg)
			conds = append(conds, fmt.Sprintf("%s %s= %s AND (%s, %s) %s (%s, %s)", q.SortKey, cmp, key, q.SortKey, q.SortID,
				cmp, key, a.Add(id)))
		}
	}
	order := fmt.Sprintf(" ORDER BY %s %s", q.SortKey, dir)
	if q.SortKey != q.SortID {
		order += fmt.Sprintf(", %s %s", q.SortID, dir)
	}
	// The limit is written into the text: PostgreSQL costs a cached plan without knowing a
	// bound LIMIT, judges it worse than planning each run anew, and so plans every run.
	query := `SELECT ` + q.Columns + q.From + ` WHERE ` + Where(conds) + order + ` LIMIT ` + strconv.Itoa(page.Limit+1)
	if page.Number > 0 {
		query += ` OFFSET ` + a.Add(page.Offset())
	}
	rows, err := db.QueryContext(ctx, query, a.Values()...)
	if err != nil {
		return nil, "", nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, "", nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, "", nil, err
	}
	next := ""
	if len(out) > page.Limit {
		out = out[:page.Limit]
		if page.Number == 0 {
			k, id := key(out[len(out)-1])
			next = EncodeCursor(k, id)
		}
	}
	return out, next, total, nil
}
