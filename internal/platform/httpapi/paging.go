package httpapi

import (
	"gale/internal/platform/apperr"
	"gale/internal/platform/jsonenc"
	"gale/internal/platform/store"
)

// DefaultPageSize is the page size of a list when limit is not given.
const DefaultPageSize = 100

// MaxPageSize is the largest page a standard list returns; a larger limit is clamped to it.
const MaxPageSize = 500

// PageQuery is the paging part of a list request: cursor paging, or the legacy page number.
type PageQuery struct {
	Limit  int    `query:"limit" minimum:"1" doc:"Page size; default 100. A value above 500 is clamped to 500."`
	Cursor string `query:"cursor" doc:"Opaque cursor from the previous page's pagination.cursor."`
	Page   int    `query:"page" minimum:"1" doc:"Legacy page number (1-based); cannot be combined with cursor."`
}

// Normalize applies the default, clamps to max, and refuses cursor together with page.
func (q PageQuery) Normalize(max int) (store.Page, error) {
	if q.Cursor != "" && q.Page > 0 {
		return store.Page{}, apperr.Invalid("page", "use either cursor or page, not both")
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultPageSize
	}
	if limit > max {
		limit = max
	}
	return store.Page{Limit: limit, Cursor: q.Cursor, Number: q.Page}, nil
}

// Pagination is the paging part of the standard list envelope. In legacy page mode it also
// carries page, limit and total.
type Pagination struct {
	HasMore bool   `json:"hasMore"`
	Cursor  string `json:"cursor,omitempty" doc:"Pass back as cursor to read the next page; absent on the last page."`
	Page    int    `json:"page,omitempty"`
	Limit   int    `json:"limit,omitempty"`
	Total   *int   `json:"total,omitempty"`
}

// AppendJSON writes the paging part as encoding/json would.
func (p *Pagination) AppendJSON(b []byte) ([]byte, error) {
	b = jsonenc.Bool(jsonenc.Key(append(b, '{'), "hasMore"), p.HasMore)
	if p.Cursor != "" {
		b = jsonenc.String(jsonenc.Key(b, "cursor"), p.Cursor)
	}
	if p.Page != 0 {
		b = jsonenc.Int(jsonenc.Key(b, "page"), int64(p.Page))
	}
	if p.Limit != 0 {
		b = jsonenc.Int(jsonenc.Key(b, "limit"), int64(p.Limit))
	}
	if p.Total != nil {
		b = jsonenc.IntPtr(jsonenc.Key(b, "total"), p.Total)
	}
	return append(b, '}'), nil
}

// List is the standard list envelope {data, pagination}.
type List[T any] struct {
	Data       []T        `json:"data"`
	Pagination Pagination `json:"pagination"`
}

// AppendJSON writes the envelope itself when its rows can (see jsonenc), else through
// encoding/json as any other body.
func (l List[T]) AppendJSON(b []byte) ([]byte, error) {
	if _, ok := rowAppender(new(T)); !ok {
		return jsonenc.Value(b, plainList[T](l))
	}
	b = append(b, `{"data":`...)
	if l.Data == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range l.Data {
			if i > 0 {
				b = append(b, ',')
			}
			a, _ := rowAppender(&l.Data[i])
			var err error
			if b, err = a.AppendJSON(b); err != nil {
				return b, err
			}
		}
		b = append(b, ']')
	}
	b, err := l.Pagination.AppendJSON(append(b, `,"pagination":`...))
	return append(b, '}'), err
}

// rowAppender is the encoder of a row of a list: the row itself when rows are pointers to
// a type with AppendJSON, else the row's address.
func rowAppender[T any](row *T) (jsonenc.Appender, bool) {
	if a, ok := any(*row).(jsonenc.Appender); ok {
		return a, true
	}
	a, ok := any(row).(jsonenc.Appender)
	return a, ok
}

// plainList is List without its AppendJSON, for encoding/json.
type plainList[T any] List[T]

// ListBody wraps a list envelope as a huma response.
type ListBody[T any] struct {
	Body List[T]
}

// ListPage builds a list response from the rows, the next cursor and (legacy page mode) the total.
func ListPage[T any](rows []T, next string, page store.Page, total *int) *ListBody[T] {
	p := Pagination{HasMore: next != "", Cursor: next}
	if page.Number > 0 {
		p.Page, p.Limit, p.Total = page.Number, page.Limit, total
		p.HasMore = total != nil && page.Number*page.Limit < *total
	}
	return &ListBody[T]{Body: List[T]{Data: rows, Pagination: p}}
}
