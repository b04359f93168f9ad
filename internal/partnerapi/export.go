package partnerapi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"gale/internal/access"
	"gale/internal/apperr"
	"gale/internal/httpapi"
	"gale/internal/store"
)

// Page sizes of the exports (§8).
const (
	defaultExportLimit = 100
	maxExportLimit     = 500
)

// ExportQuery is the query of every export route.
type ExportQuery struct {
	Limit        int    `query:"limit" minimum:"1" doc:"Page size; default 100. A value above 500 is clamped to 500."`
	Cursor       string `query:"cursor" maxLength:"2048" doc:"pagination.cursor of the previous page, unchanged. It is signed: an altered cursor, or one of another export, is 400."`
	UpdatedSince string `query:"updatedSince" maxLength:"64" doc:"RFC 3339 time: only rows changed at or after it, in order of change (see docs/partner-api.md). The cursor carries it, so later pages may omit it."`
}

// exportPage is the answer of an export route.
type exportPage[T any] struct {
	RateLimitHeaders
	Body httpapi.List[T]
}

// export describes one export route.
type export[T any] struct {
	name, scope, summary, description string
	// fetch reads a page; nil for exports whose domain does not exist yet (always empty).
	fetch func(context.Context, store.Seek) ([]T, bool, error)
	// key is a row's sort key: its change time (the updatedSince order) and its IDs.
	key func(T) (time.Time, []string)
	// byID keeps ID order with updatedSince too: the rows are never updated, only replaced.
	byID bool
}

// cursor is a position in an export traversal: the export, the updatedSince the traversal
// runs with, and the sort key of the last row read. Tokens are base64url(JSON) "."
// base64url(HMAC-SHA256 of the partner and the payload, 128 bits).
type cursor struct {
	Export string   `json:"e"`
	Since  string   `json:"s,omitempty"`
	Time   string   `json:"t,omitempty"`
	IDs    []string `json:"k"`
}

func (s *Service) cursorMAC(partnerID, payload string) []byte {
	m := hmac.New(sha256.New, s.cursorKey)
	m.Write([]byte(partnerID))
	m.Write([]byte{0})
	m.Write([]byte(payload))
	return m.Sum(nil)[:16]
}

func (s *Service) signCursor(partnerID string, c cursor) string {
	b, _ := json.Marshal(c)
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + base64.RawURLEncoding.EncodeToString(s.cursorMAC(partnerID, payload))
}

// openCursor verifies a token signed for the partner and decodes it.
func (s *Service) openCursor(partnerID, token string) (cursor, error) {
	var c cursor
	bad := apperr.Invalid("cursor", "invalid cursor: pass back pagination.cursor of a previous page of this export, unchanged")
	payload, mac, ok := strings.Cut(token, ".")
	sig, err := base64.RawURLEncoding.DecodeString(mac)
	if !ok || err != nil || !hmac.Equal(sig, s.cursorMAC(partnerID, payload)) {
		return c, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || json.Unmarshal(b, &c) != nil {
		return c, bad
	}
	return c, nil
}

const cursorTime = time.RFC3339Nano

// seek turns an export query into the page to read.
func (s *Service) seek(partnerID, name string, byID bool, in *ExportQuery) (store.Seek, error) {
	sk := store.Seek{Limit: min(in.Limit, maxExportLimit)}
	if in.Limit <= 0 {
		sk.Limit = defaultExportLimit
	}
	if in.UpdatedSince != "" {
		t, err := time.Parse(time.RFC3339Nano, in.UpdatedSince)
		if err != nil {
			return sk, apperr.Invalid("updatedSince", "use an RFC 3339 time such as 2026-01-31T00:00:00Z")
		}
		sk.Since = t.UTC().Truncate(time.Microsecond)
	}
	if in.Cursor == "" {
		return sk, nil
	}
	c, err := s.openCursor(partnerID, in.Cursor)
	if err != nil {
		return sk, err
	}
	if c.Export != name {
		return sk, apperr.Invalid("cursor", "the cursor belongs to the "+c.Export+" export")
	}
	var since time.Time
	if c.Since != "" {
		if since, err = time.Parse(cursorTime, c.Since); err != nil {
			return sk, apperr.Invalid("cursor", "invalid cursor")
		}
	}
	if in.UpdatedSince != "" && !since.Equal(sk.Since) {
		return sk, apperr.Invalid("updatedSince", "differs from the one the cursor's traversal runs with; start without cursor to change it")
	}
	sk.Since = since
	if !since.IsZero() && !byID {
		t, err := time.Parse(cursorTime, c.Time)
		if err != nil {
			return sk, apperr.Invalid("cursor", "invalid cursor")
		}
		sk.After = append(sk.After, t)
	}
	for _, id := range c.IDs {
		sk.After = append(sk.After, id)
	}
	return sk, nil
}

// runExport answers one page of an export.
func runExport[T any](ctx context.Context, s *Service, e export[T], in *ExportQuery) (*exportPage[T], error) {
	partnerID := access.ScopeFrom(ctx).PartnerID
	sk, err := s.seek(partnerID, e.name, e.byID, in)
	if err != nil {
		return nil, err
	}
	rows, more := []T{}, false
	if e.fetch != nil {
		if rows, more, err = e.fetch(ctx, sk); err != nil {
			return nil, err
		}
	}
	page := httpapi.Pagination{HasMore: more}
	if more {
		t, ids := e.key(rows[len(rows)-1])
		c := cursor{Export: e.name, IDs: ids}
		if !sk.Since.IsZero() {
			c.Since = sk.Since.Format(cursorTime)
			if !e.byID {
				c.Time = t.UTC().Format(cursorTime)
			}
		}
		page.Cursor = s.signCursor(partnerID, c)
	}
	c, err := s.credentialOf(ctx, s.db)
	if err != nil {
		return nil, err
	}
	rl, err := s.peek(ctx, writeBudgets(c))
	if err != nil {
		return nil, err
	}
	return &exportPage[T]{RateLimitHeaders: rl, Body: httpapi.List[T]{Data: rows, Pagination: page}}, nil
}
