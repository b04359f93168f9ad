package auth_test

import (
	"context"
	"testing"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/config"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

func authCache(d time.Duration) apptest.Option {
	return func(c *config.Config) { c.AuthCacheTTL = d }
}

// revokeBeside ends every session in the database directly, as another process would,
// without the node hearing of it.
func revokeBeside(t *testing.T, e *apptest.Env) {
	t.Helper()
	if _, err := e.App.DB.SQL.Exec(`UPDATE refresh_tokens SET revoked_at = $1`, store.Now()); err != nil {
		t.Fatal(err)
	}
}

const partnersPath = "/api/v1/orgs/partners"

// A node keeps an access token's principal for AUTH_CACHE_MS: a change made beside the API
// shows once that time is over, or at once when the node is told; with 0 it shows at once.
func TestCachedPrincipalsLastAtMostTheCacheTime(t *testing.T) {
	e := apptest.New(t, authCache(time.Hour))
	c := e.Admin()
	e.Must(200, c, "GET", partnersPath, nil)
	revokeBeside(t, e)
	if r := e.Do(c, "GET", partnersPath, nil); r.Status != 200 {
		t.Fatalf("within the cache time the node answers from its cache: %d, want 200", r.Status)
	}
	e.App.Wrote(context.Background())
	if r := e.Do(c, "GET", partnersPath, nil); r.Status != 401 {
		t.Fatalf("after the node was told: %d, want 401", r.Status)
	}

	short := e.SecondNode(authCache(300 * time.Millisecond))
	c = short.Admin()
	short.Must(200, c, "GET", partnersPath, nil)
	revokeBeside(t, short)
	time.Sleep(350 * time.Millisecond)
	if r := short.Do(c, "GET", partnersPath, nil); r.Status != 401 {
		t.Fatalf("after the cache time: %d, want 401", r.Status)
	}

	off := e.SecondNode(authCache(0))
	c = off.Admin()
	off.Must(200, c, "GET", partnersPath, nil)
	revokeBeside(t, off)
	if r := off.Do(c, "GET", partnersPath, nil); r.Status != 401 {
		t.Fatalf("without a cache: %d, want 401", r.Status)
	}
}

// Every write through the API ends the node's cached principals once it has committed,
// whoever made it: the change shows on the very next request, however long the cache time.
func TestWritesThroughTheAPIEndCachedPrincipalsAtOnce(t *testing.T) {
	e := apptest.New(t, authCache(time.Hour))
	admin := e.Admin()
	partnerID := e.CreatePartner(admin, "Cache Partner")
	userID, user := e.CreateUser("cached@gale.test", access.LevelPartner, partnerID, "", "")
	e.Must(200, user, "GET", "/api/v1/orgs/organizations", nil)
	e.Must(204, admin, "DELETE", "/api/v1/users/"+userID, nil)
	if r := e.Do(user, "GET", "/api/v1/orgs/organizations", nil); r.Status != 401 {
		t.Fatalf("deleted user's token: %d, want 401", r.Status)
	}

	_, s := login(e, apptest.AdminEmail, apptest.AdminPassword)
	own := apptest.Bearer(s.AccessToken)
	e.Must(200, own, "GET", partnersPath, nil)
	e.Must(204, own, "POST", "/api/v1/auth/logout", nil)
	if r := e.Do(own, "GET", partnersPath, nil); r.Status != 401 {
		t.Fatalf("token after its own logout: %d, want 401", r.Status)
	}
}

// On PostgreSQL a sign-out on one node ends the session on the others through the bus,
// long before their cache time is over, even when the node signed out on caches nothing.
func TestSignOutOnOneNodeReachesTheOthers(t *testing.T) {
	a := apptest.New(t, authCache(0))
	if a.App.DB.Dialect != store.Postgres {
		t.Skip("nodes share a bus only on PostgreSQL; SQLite runs one node")
	}
	b := a.SecondNode(authCache(time.Hour))
	_, s := login(a, apptest.AdminEmail, apptest.AdminPassword)
	c := apptest.Bearer(s.AccessToken)
	b.Must(200, c, "GET", partnersPath, nil)
	a.Must(204, c, "POST", "/api/v1/auth/logout", nil)
	apptest.Eventually(t, 10*time.Second, func() bool { return b.Do(c, "GET", partnersPath, nil).Status == 401 })
}
