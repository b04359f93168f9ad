package store

import (
	"context"
	"fmt"

	"gale/internal/platform/apperr"
)

// RankedQuery is a list whose order is computed (aggregates, sort keys in mixed directions)
// and which no keyset can therefore seek: its pages are offsets into the order.
type RankedQuery struct {
	// Select is the statement through its ORDER BY, which ends on a unique key so that every
	// row has one place.
	Select string
	// Count counts the rows of Select, for legacy page mode.
	Count string
	Args  *Args
}

// RankedList runs q for page and returns the rows, the next page's cursor ("" on the last page
// and in page mode) and, in legacy page mode, the total. The cursor holds the offset of the
// next page; one that is not a cursor of a ranked list is a 400 on cursor.
func RankedList[T any](ctx context.Context, db Querier, q RankedQuery, page Page, scan func(Scanner) (T, error)) ([]T, string, *int, error) {
	off := page.Offset()
	if page.Number == 0 && page.Cursor != "" {
		if err := DecodeCursor(page.Cursor, &off); err != nil || off < 0 {
			return nil, "", nil, apperr.Invalid("cursor", "malformed cursor; pass back the cursor of a previous page")
		}
	}
	var total *int
	if page.Number > 0 {
		var n int
		if err := db.QueryRowContext(ctx, q.Count, q.Args.Values()...).Scan(&n); err != nil {
			return nil, "", nil, fmt.Errorf("count the rows of a ranked list: %w", err)
		}
		total = &n
	}
	out, err := QueryAll(ctx, db, q.Select+` LIMIT `+q.Args.Add(page.Limit+1)+` OFFSET `+q.Args.Add(off), q.Args.Values(), scan)
	if err != nil {
		return nil, "", nil, fmt.Errorf("read a page of a ranked list: %w", err)
	}
	if len(out) <= page.Limit {
		return out, "", total, nil
	}
	next := ""
	if page.Number == 0 {
		next = EncodeCursor(off + page.Limit)
	}
	return out[:page.Limit], next, total, nil
}
