package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"gale/internal/platform/apperr"
)

// Scanner is a row to scan: *sql.Row and *sql.Rows.
type Scanner interface{ Scan(dest ...any) error }

// ListQuery is one paged list: the columns and FROM clause, the conditions (with their
// arguments in Args, which every query gives, even when empty), and the sort column plus a
// unique ID column that break ties. The cursor encodes both values of the last row.
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
	// Version is the row-version column of the table, for CachedList.
	Version string
	// Pages, when set, keeps the pages of CachedList in cursor mode (see PageCache).
	Pages *PageCache
}

// List runs q in cursor mode, or in legacy page mode (then with the total). It returns the
// rows, the next page's cursor ("" on the last page and in page mode) and the total (page
// mode only). key gives the sort key and ID of a row.
func List[T any](ctx context.Context, db Querier, q ListQuery, page Page, scan func(Scanner) (T, error),
	key func(T) (string, string)) ([]T, string, *int, error) {
	p, total, err := planList(ctx, db, q, page)
	if err != nil {
		return nil, "", nil, fmt.Errorf("list%s: %w", q.From, err)
	}
	out, next, err := fullPage(ctx, db, p, q.Columns, scan, key)
	if err != nil {
		return nil, "", nil, fmt.Errorf("list%s: %w", q.From, err)
	}
	return out, next, total, nil
}

// fullPage reads the rows of a planned page in full.
func fullPage[T any](ctx context.Context, db Querier, p *listPlan, columns string, scan func(Scanner) (T, error),
	key func(T) (string, string)) ([]T, string, error) {
	out, err := QueryAll(ctx, db, p.query(columns), p.args.Values(), scan)
	if err != nil {
		return nil, "", err
	}
	out, next := trimPage(p, out, key)
	return out, next, nil
}

// CachedList is List over a table with a row version (q.Version), taking unchanged rows from
// cache: it reads the IDs and versions of the page, then in full only the rows the cache does
// not hold at their current version, with the list's conditions again. Should a row have left
// the list between the two reads, the page is read in full instead, as List reads it. A nil
// cache reads every page in full.
func CachedList[T any](ctx context.Context, db Querier, q ListQuery, page Page, cache *RowCache[T],
	scan func(Scanner) (T, error), key func(T) (string, string)) ([]T, string, *int, error) {
	if cache == nil {
		return List(ctx, db, q, page, scan, key)
	}
	p, total, err := planList(ctx, db, q, page)
	if err != nil {
		return nil, "", nil, fmt.Errorf("list%s: %w", q.From, err)
	}
	refs, err := pageRefs(ctx, db, q, p, page, time.Now())
	if err != nil {
		return nil, "", nil, fmt.Errorf("list%s: %w", q.From, err)
	}
	// The row past the page only tells that another page follows; its content is not needed.
	shown := refs[:min(len(refs), page.Limit)]
	out := make([]T, len(refs))
	now := time.Now()
	var missing []int // positions of the rows to read in full
	for i, r := range shown {
		if v, ok := cache.get(r.id, r.version, now); ok {
			out[i] = v
		} else {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		ids, at := make([]string, len(missing)), make(map[string]int, len(missing))
		for j, i := range missing {
			ids[j], at[shown[i].id] = shown[i].id, i
		}
		a := Args{vals: slices.Clone(p.args.vals[:p.baseArgs])}
		conds := append(slices.Clip(p.conds[:p.baseConds]), q.SortID+" IN "+a.In(ids))
		found := 0
		var version int64
		err := eachRow(ctx, db, `SELECT `+q.Columns+`, `+q.Version+q.From+` WHERE `+Where(conds), a.Values(), func(s Scanner) error {
			v, err := scan(ScanAlso{s, []any{&version}})
			if err != nil {
				return err
			}
			_, id := key(v)
			if i, ok := at[id]; ok {
				out[i] = cache.put(id, version, v)
				found++
			}
			return nil
		})
		if err != nil {
			return nil, "", nil, err
		}
		if found < len(missing) {
			out, next, err := fullPage(ctx, db, p, q.Columns, scan, key)
			return out, next, total, err
		}
	}
	out, next := trimPage(p, out, key)
	return out, next, total, nil
}

// pageRefs returns the IDs and versions of a planned page's rows (and of the one past it),
// from q.Pages when it holds the page, else from the database.
func pageRefs(ctx context.Context, db Querier, q ListQuery, p *listPlan, page Page, now time.Time) ([]rowRef, error) {
	query := p.query(q.SortID + ", " + q.Version)
	key, cacheable := "", q.Pages != nil && page.Number == 0
	if cacheable {
		key, cacheable = pageKey(query, p.args.Values())
	}
	var generation uint64
	if cacheable {
		if refs, ok := q.Pages.Get(key, now); ok {
			return refs, nil
		}
		generation = q.Pages.Generation()
	}
	refs, err := QueryAll(ctx, db, query, p.args.Values(), func(s Scanner) (rowRef, error) {
		var r rowRef
		return r, s.Scan(&r.id, &r.version)
	})
	if err == nil && cacheable {
		q.Pages.Put(key, refs, generation, now)
	}
	return refs, err
}

// ScanAlso scans a row with more columns, past those its own scan function reads, into Dest:
// a row's version, say.
type ScanAlso struct {
	Row  Scanner
	Dest []any
}

// Scan implements Scanner.
func (s ScanAlso) Scan(dest ...any) error { return s.Row.Scan(append(dest, s.Dest...)...) }

// listPlan is a list query made ready for one page.
type listPlan struct {
	from, order, tail string
	conds             []string
	args              *Args
	// baseConds and baseArgs count the list's own conditions and their arguments, before the
	// cursor's and the offset's.
	baseConds, baseArgs int
	page                Page
}

func planList(ctx context.Context, db Querier, q ListQuery, page Page) (*listPlan, *int, error) {
	a := q.Args
	p := &listPlan{from: q.From, conds: slices.Clip(q.Conds), args: a, baseConds: len(q.Conds), baseArgs: len(a.vals),
		page: page}
	cmp, dir := ">", "ASC"
	if q.Desc {
		cmp, dir = "<", "DESC"
	}
	var total *int
	if page.Number > 0 {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) `+q.From+` WHERE `+Where(p.conds), a.Values()...).Scan(&n); err != nil {
			return nil, nil, err
		}
		total = &n
	} else if page.Cursor != "" {
		var k, id string
		if err := DecodeCursor(page.Cursor, &k, &id); err != nil {
			return nil, nil, err
		}
		if !ValidID(id) || (q.SortKey == q.SortID && !ValidID(k)) {
			return nil, nil, apperr.Invalid("cursor", "malformed cursor; pass back the cursor of a previous page")
		}
		if q.SortKey == q.SortID {
			p.conds = append(p.conds, fmt.Sprintf("%s %s %s", q.SortID, cmp, a.Add(id)))
		} else {
			var karg any = k
			if q.KeyArg != nil {
				v, err := q.KeyArg(k)
				if err != nil {
					return nil, nil, apperr.Invalid("cursor", "malformed cursor; pass back the cursor of a previous page")
				}
				karg = v
			}
			// The row-value comparison alone is the condition; the bound on the key before it lets
			// SQLite range over an index whose key is an expression (it ranges row values only
			// over plain columns). PostgreSQL ranges over both.
			key := a.Add(karg)
			p.conds = append(p.conds, fmt.Sprintf("%s %s= %s AND (%s, %s) %s (%s, %s)", q.SortKey, cmp, key, q.SortKey, q.SortID,
				cmp, key, a.Add(id)))
		}
	}
	p.order = fmt.Sprintf(" ORDER BY %s %s", q.SortKey, dir)
	if q.SortKey != q.SortID {
		p.order += fmt.Sprintf(", %s %s", q.SortID, dir)
	}
	// The limit is written into the text: PostgreSQL costs a cached plan without knowing a
	// bound LIMIT, judges it worse than planning each run anew, and so plans every run.
	p.tail = ` LIMIT ` + strconv.Itoa(page.Limit+1)
	if page.Number > 0 {
		p.tail += ` OFFSET ` + a.Add(page.Offset())
	}
	return p, total, nil
}

// query is the page's statement selecting columns.
func (p *listPlan) query(columns string) string {
	return `SELECT ` + columns + p.from + ` WHERE ` + Where(p.conds) + p.order + p.tail
}

// trimPage cuts the row read past the page and, in cursor mode, makes the next page's cursor
// from the last row shown.
func trimPage[T any](p *listPlan, out []T, key func(T) (string, string)) ([]T, string) {
	if len(out) <= p.page.Limit {
		return out, ""
	}
	out = out[:p.page.Limit]
	if p.page.Number > 0 {
		return out, ""
	}
	k, id := key(out[len(out)-1])
	return out, EncodeCursor(k, id)
}

// QueryAll runs a query and scans every row (an empty slice, not nil, when there are none).
func QueryAll[T any](ctx context.Context, db Querier, query string, args []any, scan func(Scanner) (T, error)) ([]T, error) {
	out := []T{}
	err := eachRow(ctx, db, query, args, func(s Scanner) error {
		v, err := scan(s)
		out = append(out, v)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScanString scans a row of one text column, for QueryAll.
func ScanString(row Scanner) (string, error) {
	var s string
	err := row.Scan(&s)
	return s, err
}

// eachRow runs a query and hands every row to fn.
func eachRow(ctx context.Context, db Querier, query string, args []any, fn func(Scanner) error) error {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
