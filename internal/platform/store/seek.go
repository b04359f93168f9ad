package store

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Seek is a request for one page of a keyset traversal (the partner API's exports): the rows
// after the sort key of the previous page's last row, in the order of the key columns.
type Seek struct {
	// Since, when set, keeps rows changed at or after it, ordered by their change time first;
	// zero means every row, in ID order.
	Since time.Time
	// After is the sort key of the previous page's last row, one value per key column (the
	// change time first when Since is set); nil starts at the beginning.
	After []any
	// Limit is the page size.
	Limit int
}

// SeekQuery is one page of rows ordered by Keys, ascending; the key columns together must be
// unique, so that every row has one place in the order. Rows added while a client pages land
// at their place in the order: after the cursor (and are read later) or before it (and are
// not), never twice.
type SeekQuery struct {
	Columns string // "a, b, c"
	From    string // " FROM t"
	Conds   []string
	Args    *Args
	Keys    []string
}

// SeekPage runs q for page s and returns up to s.Limit rows and whether more follow.
func SeekPage[T any](ctx context.Context, db Querier, q SeekQuery, s Seek, scan func(Scanner) (T, error)) ([]T, bool, error) {
	a, conds := q.Args, slices.Clip(q.Conds)
	if len(s.After) > 0 {
		if len(s.After) != len(q.Keys) {
			return nil, false, fmt.Errorf("seek: %d key values for %d key columns", len(s.After), len(q.Keys))
		}
		ph := make([]string, len(s.After))
		for i, v := range s.After {
			ph[i] = a.Add(v)
		}
		// A row-value comparison uses the (tenant, key...) index on both backends.
		conds = append(conds, "("+strings.Join(q.Keys, ", ")+") > ("+strings.Join(ph, ", ")+")")
	}
	// The limit is in the text, as in List.
	query := `SELECT ` + q.Columns + q.From + ` WHERE ` + Where(conds) + ` ORDER BY ` + strings.Join(q.Keys, ", ") +
		` LIMIT ` + strconv.Itoa(s.Limit+1)
	rows, err := db.QueryContext(ctx, query, a.Values()...)
	if err != nil {
		return nil, false, fmt.Errorf("seek%s: %w", q.From, err)
	}
	defer rows.Close()
	out := make([]T, 0, s.Limit)
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, false, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	if len(out) > s.Limit {
		return out[:s.Limit], true, nil
	}
	return out, false, nil
}

// Keys returns the ORDER BY columns of a traversal of rows with ID columns ids and change time
// column changed: the IDs, or the change time and then the IDs when s.Since is set. On the
// first page of such a traversal it adds the condition changed >= s.Since to conds; later
// pages start after a row that met it, which implies it, and SQLite would take the weaker
// bound for its index range instead of the cursor's.
func (s Seek) Keys(a *Args, conds *[]string, changed string, ids ...string) []string {
	if s.Since.IsZero() {
		return ids
	}
	if len(s.After) == 0 {
		*conds = append(*conds, changed+" >= "+a.Add(s.Since))
	}
	return append([]string{changed}, ids...)
}

// IDFloor is the smallest ID NewID can return at t or later: IDs are UUIDv7, whose first 48
// bits are the Unix time in milliseconds. Rows that are never updated (only replaced) use it
// to find the rows created since a time with a range over their primary key.
func IDFloor(t time.Time) string {
	ms := t.UnixMilli()
	return fmt.Sprintf("%08x-%04x-0000-0000-000000000000", uint64(ms)>>16, uint64(ms)&0xffff)
}

// KeysetList pages q, in the ascending order of its Keys (unique together), for an API list.
// In cursor mode the cursor holds the key values of the page's last row, read back into after
// (pointers, one of each key's type) and compared as a row value, so that rows added while a
// client pages are neither skipped nor read twice; in legacy page mode it counts the rows and
// reads the page at its offset. key gives the key values of a row.
func KeysetList[T any](ctx context.Context, db Querier, q SeekQuery, page Page, scan func(Scanner) (T, error),
	key func(T) []any, after ...any) ([]T, string, *int, error) {
	if page.Number > 0 {
		where := ` WHERE ` + Where(q.Conds)
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*)`+q.From+where, q.Args.Values()...).Scan(&n); err != nil {
			return nil, "", nil, fmt.Errorf("count%s: %w", q.From, err)
		}
		out, err := QueryAll(ctx, db, `SELECT `+q.Columns+q.From+where+` ORDER BY `+strings.Join(q.Keys, ", ")+
			` LIMIT `+strconv.Itoa(page.Limit)+` OFFSET `+strconv.Itoa(page.Offset()), q.Args.Values(), scan)
		if err != nil {
			return nil, "", nil, fmt.Errorf("page%s: %w", q.From, err)
		}
		return out, "", &n, nil
	}
	s := Seek{Limit: page.Limit}
	if page.Cursor != "" {
		if err := DecodeCursor(page.Cursor, after...); err != nil {
			return nil, "", nil, err
		}
		for _, p := range after {
			v := reflect.ValueOf(p).Elem().Interface()
			if t, ok := v.(time.Time); ok {
				v = t.UTC()
			}
			s.After = append(s.After, v)
		}
	}
	out, more, err := SeekPage(ctx, db, q, s, scan)
	if err != nil || !more {
		return out, "", nil, err
	}
	return out, EncodeCursor(key(out[len(out)-1])...), nil, nil
}
