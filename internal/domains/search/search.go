package search

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"gale/internal/domains/devices"
	"gale/internal/domains/identity"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
)

// Searchable types, and the permission each needs beyond devices:read (the route's own).
const (
	TypeDevices       = "devices"
	TypeUsers         = "users"
	TypeOrganizations = "organizations"
)

var typePermission = map[string]access.Perm{
	TypeDevices:       access.DevicesRead,
	TypeUsers:         access.UsersRead,
	TypeOrganizations: access.OrganizationsRead,
}

var allTypes = []string{TypeDevices, TypeUsers, TypeOrganizations}

// notYet are types the spec names that have no data in Gale yet.
var notYet = []string{"scripts", "alerts"}

// Limits of a search.
const (
	MinQuery     = 2
	MaxQuery     = 100
	DefaultLimit = 10
	MaxLimit     = 50
)

// Result is one hit.
type Result struct {
	ID       string  `json:"id" format:"uuid"`
	Type     string  `json:"type" enum:"device,user,organization"`
	Title    string  `json:"title"`
	Subtitle string  `json:"subtitle"`
	OrgID    *string `json:"orgId,omitempty" format:"uuid" doc:"The organization of a device or organization user; the organization itself for an organization."`
}

// Results holds the hits per type; a type not searched (not asked for, or not permitted) is absent.
type Results struct {
	Devices       *[]Result `json:"devices,omitempty"`
	Users         *[]Result `json:"users,omitempty"`
	Organizations *[]Result `json:"organizations,omitempty"`
}

// Answer is the answer of GET /search.
type Answer struct {
	Query   string  `json:"query"`
	Results Results `json:"results"`
}

// Query is a validated search request.
type Query struct {
	Text  string
	Types []string
	Limit int
}

// ParseQuery checks q (2 to 100 characters once trimmed), types (comma-separated; empty
// means all) and limit (1 to 50; 0 means 10).
func ParseQuery(q, types string, limit int) (Query, error) {
	text := strings.TrimSpace(q)
	if n := utf8.RuneCountInString(text); n < MinQuery || n > MaxQuery {
		return Query{}, apperr.Invalid("q", "search for 2 to 100 characters")
	}
	if limit == 0 {
		limit = DefaultLimit
	}
	if limit < 1 || limit > MaxLimit {
		return Query{}, apperr.Invalid("limit", "use 1 to 50")
	}
	out := Query{Text: text, Limit: limit}
	for _, t := range strings.Split(types, ",") {
		t = strings.TrimSpace(t)
		switch {
		case t == "" || slices.Contains(out.Types, t):
		case slices.Contains(notYet, t):
			return Query{}, apperr.Invalid("types", t+" are not searchable yet; use devices, users or organizations")
		case !slices.Contains(allTypes, t):
			return Query{}, apperr.Invalid("types", "unknown type; use devices, users or organizations")
		default:
			out.Types = append(out.Types, t)
		}
	}
	if len(out.Types) == 0 {
		out.Types = allTypes
	}
	return out, nil
}

// Search finds devices, users and organizations in the caller's scope whose names (and the
// other attributes listed per type) contain the text, case-insensitively. Prefix matches come
// first. A type is searched only when the caller holds its read permission.
func (s *Service) Search(ctx context.Context, q Query) (Answer, error) {
	p := access.PrincipalFrom(ctx)
	if p == nil {
		return Answer{}, apperr.Unauthorized("sign in first")
	}
	ans := Answer{Query: q.Text}
	for _, t := range q.Types {
		if !p.Can(typePermission[t]) {
			continue
		}
		var rows []Result
		var err error
		switch t {
		case TypeDevices:
			rows, err = s.devices(ctx, p.Scope, q)
			ans.Results.Devices = &rows
		case TypeUsers:
			rows, err = s.users(ctx, p.Scope, q)
			ans.Results.Users = &rows
		case TypeOrganizations:
			rows, err = s.organizations(ctx, p.Scope, q)
			ans.Results.Organizations = &rows
		}
		if err != nil {
			return Answer{}, fmt.Errorf("search %s: %w", t, err)
		}
	}
	return ans, nil
}

// match renders "(LOWER(c1) LIKE x OR ...)" and the ORDER BY term that puts rows whose first
// column starts with the text first.
func match(a *store.Args, text string, cols ...string) (cond, prefixFirst string) {
	return store.Contains(a, text, cols...),
		"CASE WHEN LOWER(" + cols[0] + ") LIKE " + a.Add(store.EscapeLike(strings.ToLower(text))+"%") + ` ESCAPE '\' THEN 0 ELSE 1 END`
}

// devices searches hostname, display name, serial number and IP address of live devices.
func (s *Service) devices(ctx context.Context, scope access.Scope, q Query) ([]Result, error) {
	var a store.Args
	cond, first := match(&a, q.Text, "d.hostname", "COALESCE(d.display_name, '')", "d.serial_number", "d.ip_address")
	return store.QueryAll(ctx, s.db, devices.SelectLive("d.id, d.hostname, d.display_name, d.ip_address, d.serial_number, d.org_id", "",
		deviceInScope(scope, &a), cond)+` ORDER BY `+first+`, d.hostname, d.id LIMIT `+a.Add(q.Limit), a.Values(),
		func(r store.Scanner) (Result, error) {
			var id, host, ip, serial, org string
			var display sql.NullString
			if err := r.Scan(&id, &host, &display, &ip, &serial, &org); err != nil {
				return Result{}, err
			}
			title, sub := host, []string{}
			if display.Valid && display.String != "" && display.String != host {
				title, sub = display.String, append(sub, host)
			}
			for _, v := range []string{ip, serial} {
				if v != "" {
					sub = append(sub, v)
				}
			}
			return Result{ID: id, Type: "device", Title: title, Subtitle: strings.Join(sub, " · "), OrgID: &org}, nil
		})
}

// users searches name and email of the users the caller may list (the users routes' rule).
func (s *Service) users(ctx context.Context, scope access.Scope, q Query) ([]Result, error) {
	var a store.Args
	cond, first := match(&a, q.Text, "u.name", "u.email")
	return store.QueryAll(ctx, s.db, `SELECT u.id, u.name, u.email, u.org_id`+identity.UsersInScope(scope, &a)+
		` AND `+cond+` ORDER BY `+first+`, u.email, u.id LIMIT `+a.Add(q.Limit), a.Values(), func(r store.Scanner) (Result, error) {
		var res Result
		var org sql.NullString
		err := r.Scan(&res.ID, &res.Title, &res.Subtitle, &org)
		res.Type, res.OrgID = "user", store.StringPtr(org)
		return res, err
	})
}

// organizations searches name and slug of organizations in scope that are not deleted.
func (s *Service) organizations(ctx context.Context, scope access.Scope, q Query) ([]Result, error) {
	var a store.Args
	cond, first := match(&a, q.Text, "o.name", "o.slug")
	return store.QueryAll(ctx, s.db, `SELECT o.id, o.name, o.slug`+tenancy.OrgsInScope(scope, &a)+
		` AND `+cond+` ORDER BY `+first+`, o.name, o.id LIMIT `+a.Add(q.Limit), a.Values(), func(r store.Scanner) (Result, error) {
		var res Result
		err := r.Scan(&res.ID, &res.Title, &res.Subtitle)
		id := res.ID
		res.Type, res.OrgID = "organization", &id
		return res, err
	})
}

type searchInput struct {
	Q     string `query:"q" doc:"2 to 100 characters; matched anywhere, case-insensitively."`
	Types string `query:"types" doc:"Comma-separated: devices, users, organizations (default all)."`
	Limit int    `query:"limit" minimum:"1" maximum:"50" doc:"Hits per type, 1 to 50; default 10."`
}

type searchOutput struct{ Body Answer }

func (s *Service) registerSearch(api *httpapi.Server) {
	httpapi.Register(api, httpapi.Route{ID: "global-search", Method: http.MethodGet, Path: "/search", Tag: "Search",
		Permission: access.DevicesRead, Summary: "Search devices, users and organizations",
		Description: "Users are searched only with users:read, organizations only with organizations:read; a type not searched is absent " +
			"from results. Scripts and alerts are not searchable yet."},
		func(ctx context.Context, in *searchInput) (*searchOutput, error) {
			q, err := ParseQuery(in.Q, in.Types, in.Limit)
			if err != nil {
				return nil, err
			}
			ans, err := s.Search(ctx, q)
			return &searchOutput{ans}, err
		})
}
