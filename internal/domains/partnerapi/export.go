package partnerapi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/partnerexport"
	"gale/internal/platform/store"
)

// Page sizes of the exports (§8).
const (
	defaultExportLimit = 100
	maxExportLimit     = 500
)

// ExportQuery is the query of every export route.
type ExportQuery = partnerexport.Query

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

// Route is the route of an export.
func (s *Service) Route(name string, scope access.Perm, summary, description string) httpapi.Route {
	return httpapi.Route{ID: "partner-export-" + name, Method: http.MethodGet, Path: "/partner-api/" + name,
		Tag: partnerTag, ServicePrincipal: true, Permission: scope, Summary: summary,
		Description: description + " Cursor-paged: follow pagination.cursor while hasMore; limit up to 500. " +
			"Without updatedSince rows come in ID order; with it, in order of change."}
}

// Seek turns an export query into the page to read, for the caller's partner.
func (s *Service) Seek(ctx context.Context, name string, byID bool, q *ExportQuery) (store.Seek, error) {
	return s.seek(access.ScopeFrom(ctx).PartnerID, name, byID, q)
}

// Finish signs the cursor of a page whose last row has the given key (when more follow) and
// reads the caller's budget headers.
func (s *Service) Finish(ctx context.Context, name string, byID bool, sk store.Seek, more bool, last time.Time,
	lastIDs []string) (RateLimitHeaders, httpapi.Pagination, error) {
	page := httpapi.Pagination{HasMore: more}
	if more {
		c := cursor{Export: name, IDs: lastIDs}
		if !sk.Since.IsZero() {
			c.Since = sk.Since.Format(cursorTime)
			if !byID {
				c.Time = last.UTC().Format(cursorTime)
			}
		}
		page.Cursor = s.signCursor(access.ScopeFrom(ctx).PartnerID, c)
	}
	c, err := s.credentialOf(ctx, s.db)
	if err != nil {
		return RateLimitHeaders{}, page, err
	}
	rl, err := s.peek(ctx, writeBudgets(c))
	return rl, page, err
}
