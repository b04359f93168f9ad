package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
)

// The tests below show that each guard fails on the pattern it guards: its detector finds
// every occurrence in a bad snippet and nothing in a good one that does the same work the
// intended way.

func parseSnippet(t *testing.T, src string) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "snippet.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse snippet: %v", err)
	}
	return f
}

// checkSnippets runs detect on bad, which must give want findings, and on good, which must
// give none.
func checkSnippets(t *testing.T, detect func(*ast.File) []token.Pos, bad string, want int, good string) {
	t.Helper()
	if got := len(detect(parseSnippet(t, bad))); got != want {
		t.Errorf("found %d in the bad snippet, want %d", got, want)
	}
	if got := len(detect(parseSnippet(t, good))); got != 0 {
		t.Errorf("found %d in the good snippet, want 0", got)
	}
}

func TestRowLoopsCaught(t *testing.T) {
	checkSnippets(t, rowLoops, `package x

import "database/sql"

func names(db *sql.DB) ([]string, error) {
	rows, err := db.Query("SELECT name FROM t")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func drain(r *sql.Rows) {
	for r.Next() {
	}
}
`, 2, `package x

import (
	"context"

	"gale/internal/platform/store"
)

func names(ctx context.Context, q store.Querier) ([]string, error) {
	return store.QueryStrings(ctx, q, "SELECT name FROM t")
}

func drain(it interface{ Next() bool }) {
	for it.Next() {
	}
}
`)
}

func TestOwnPagersCaught(t *testing.T) {
	checkSnippets(t, ownPagers, `package x

import "gale/internal/platform/store"

func offsetOf(page store.Page) (int, error) {
	var off int
	err := store.DecodeCursor(page.Cursor, &off)
	return off, err
}

func (s *Service) list(ctx context.Context, page store.Page) error {
	var a store.Args
	_, err := s.db.QueryContext(ctx, "SELECT id FROM t ORDER BY id LIMIT "+a.Add(page.Limit+1), a.Values()...)
	return err
}

func (s *Service) legacy(ctx context.Context, limit, offset int) error {
	_, err := s.db.QueryContext(ctx, fmt.Sprintf("SELECT id FROM t ORDER BY id LIMIT %d OFFSET %d", limit, offset))
	return err
}
`, 3, `package x

import "gale/internal/platform/store"

func (s *Service) list(ctx context.Context, page store.Page) ([]Thing, string, *int, error) {
	var a store.Args
	return store.List(ctx, s.db, store.ListQuery{Columns: "t.id", From: " FROM t", Args: &a, SortKey: "t.id", SortID: "t.id"},
		page, scanThing, thingKey)
}

func (s *Service) newest(ctx context.Context, limit int) error {
	buf := make([]byte, limit+1)
	_, err := s.db.QueryContext(ctx, "SELECT id FROM t ORDER BY id DESC LIMIT 1", buf)
	return err
}
`)
}

func TestClockReadsCaught(t *testing.T) {
	checkSnippets(t, clockReads, `package x

import (
	stdtime "time"

	"gale/internal/platform/store"
)

func New() *Service { return &Service{now: store.Now} }

func (s *Service) expired(at stdtime.Time) bool { return stdtime.Now().After(at) }

func stamp() stdtime.Time { return store.Now() }
`, 3, `package x

import (
	"time"

	"gale/internal/platform/clock"
)

func New(clk clock.Clock) *Service { return &Service{now: clk.Now} }

func (s *Service) expired(at time.Time) bool { return s.clock.Now().After(at) }
`)
}

func TestByIDBodiesCaught(t *testing.T) {
	checkSnippets(t, byIDBodies, `package x

import (
	"database/sql"
	"errors"

	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

func getThing(ctx context.Context, q store.Querier, id string) (Thing, error) {
	t, err := scanThing(q.QueryRowContext(ctx, "SELECT "+thingColumns+" FROM things t WHERE t.id = $1", id))
	if errors.Is(err, sql.ErrNoRows) {
		return t, apperr.NotFound("thing")
	}
	return t, err
}

func getGroup(ctx context.Context, q store.Querier, scope access.Scope, id string) (Group, error) {
	var a store.Args
	conds := []string{"g.id = " + a.Add(id), groupFilter(scope, &a)}
	g, err := scanGroup(q.QueryRowContext(ctx, "SELECT "+groupColumns+" FROM groups g WHERE "+store.Where(conds), a.Values()...))
	if err == sql.ErrNoRows {
		return g, apperr.NotFound("group")
	}
	return g, err
}
`, 2, `package x

import (
	"database/sql"
	"errors"

	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

func getThing(ctx context.Context, q store.Querier, scope access.Scope, id string) (Thing, error) {
	var a store.Args
	return store.ByID(ctx, q, "thing", "SELECT "+thingColumns+" FROM things t", "t.id", id, &a, thingFilter(scope, &a), scanThing)
}

func activate(ctx context.Context, tx *sql.Tx, email string) error {
	var id string
	err := tx.QueryRowContext(ctx, "SELECT id FROM users WHERE email = $1", email).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return apperr.NotFound("user " + email)
	}
	_, err = tx.ExecContext(ctx, "UPDATE users SET status = 'active' WHERE id = $1", id)
	return err
}

func optional(ctx context.Context, q store.Querier, id string) (*Thing, error) {
	t, err := scanThing(q.QueryRowContext(ctx, "SELECT "+thingColumns+" FROM things t WHERE t.id = $1", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return &t, err
}
`)
}

func TestForeignDBCallsCaught(t *testing.T) {
	devices := parseSnippet(t, `package devices

import (
	"context"
	"database/sql"

	"gale/internal/platform/store"
)

func (s *Service) Owners(ctx context.Context, q store.Querier, ids []string) (map[string]string, error) { return nil, nil }

func Owners(ctx context.Context, q store.Querier, ids []string) (map[string]string, error) { return nil, nil }

func Claim(ctx context.Context, tx *sql.Tx, id string) error { return nil }

func LiveFilter(alias string) string { return alias + ".decommissioned_at IS NULL" }
`)
	handles := map[string]map[string]bool{"gale/internal/domains/devices": dbHandleFuncs([]*ast.File{devices})}
	checkSnippets(t, func(f *ast.File) []token.Pos { return foreignDBCalls(f, handles) }, `package alerts

import "gale/internal/domains/devices"

func (s *Service) evaluate(ctx context.Context, ids []string) error {
	if _, err := devices.Owners(ctx, s.db, ids); err != nil {
		return err
	}
	return devices.Claim(ctx, db, ids[0])
}
`, 2, `package alerts

import "gale/internal/domains/devices"

func (s *Service) evaluate(ctx context.Context, tx *sql.Tx, ids []string) (string, error) {
	if _, err := s.devices.Owners(ctx, s.db, ids); err != nil {
		return "", err
	}
	if _, err := devices.Owners(ctx, tx, ids); err != nil {
		return "", err
	}
	var d devices.Device
	return "SELECT d.id FROM devices d WHERE " + devices.LiveFilter("d") + d.ID, nil
}
`)
}

func TestImportsAgainstTheGrainCaught(t *testing.T) {
	app := parseSnippet(t, `package app

import (
	"gale/internal/domains/alerts"
	"gale/internal/domains/devices"
	"gale/internal/platform/module"
)

var Modules = []module.Module{
	devices.Module,
	alerts.Module,
}
`)
	order := map[string]int{}
	for i, path := range moduleOrder(app) {
		order[path] = i
	}
	for _, c := range []struct {
		pkg, bad string
		want     int
		good     string
	}{
		{"internal/domains/devices", `package devices

import "gale/internal/domains/alerts"
`, 1, `package devices

import "gale/internal/platform/store"
`},
		{"internal/domains/alerts", `package alerts

import "gale/internal/domains/pam"
`, 1, `package alerts

import (
	"gale/internal/domains/alerts/rules"
	"gale/internal/domains/devices"
)
`},
		{"internal/platform/httpapi", `package httpapi

import (
	"gale/internal/app"
	"gale/internal/domains/devices"
)
`, 2, `package httpapi

import (
	"net/http"

	"gale/internal/platform/access"
)
`},
		{"internal/wire/agentproto", `package agentproto

import (
	"github.com/jackc/pgx/v5"

	"gale/internal/platform/store"
)
`, 2, `package agentproto

import (
	"encoding/json"

	"gale/internal/wire/streams"
)
`},
	} {
		t.Run(c.pkg, func(t *testing.T) {
			checkSnippets(t, func(f *ast.File) []token.Pos { return importsAgainstTheGrain(c.pkg, f, order) }, c.bad, c.want, c.good)
		})
	}
}

func TestDatabaseCallsCaught(t *testing.T) {
	checkSnippets(t, databaseCalls, `package x

import "gale/internal/platform/store"

func (c *Console) names(ctx context.Context) ([]string, error) {
	_ = c.db.Write(ctx, func(tx *sql.Tx) error { _, err := tx.ExecContext(ctx, "DELETE FROM t"); return err })
	return store.QueryStrings(ctx, c.db, "SELECT name FROM t", nil)
}
`, 3, `package x

import "gale/internal/platform/store"

func (c *Console) names(ctx context.Context) ([]string, error) {
	list, _, _, err := c.Devices.List(ctx, devices.ListFilter{}, store.Page{Limit: 10})
	return names(list), err
}
`)
}
