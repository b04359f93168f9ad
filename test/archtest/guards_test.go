package archtest

import (
	"go/ast"
	"go/token"
	"strings"
	"testing"
)

// The lists below hold, per package, how many of an old pattern it still has. Each entry is a
// debt: a package may not gain an occurrence, and one that loses some must lower its number,
// so the lists only shrink.

// rowLoopDebt counts the hand-written loops over a query's rows (for rows.Next()).
var rowLoopDebt = map[string]int{
	"internal/domains/alerts":         1, // the evaluation facts: several row shapes from one statement prepared on SQLite, in every heartbeat
	"internal/domains/configpolicies": 1, // statistics, counted as a policy-by-device stream of any length
	"internal/domains/patches":        1, // packages gone, read through the statement cache in every scan result
}

func TestNoHandWrittenRowLoops(t *testing.T) {
	fset, files := serverFiles(t, "internal/platform/store")
	checkShrinkOnly(t, "rowLoopDebt", rowLoopDebt, occurrences(fset, files, rowLoops), "row loops",
		"store.QueryAll, store.QueryStrings or store.List")
}

// pagerDebt counts the functions that page by hand (cursor, limit+1 or offset of their own).
var pagerDebt = map[string]int{
	"internal/domains/devices":   1, // the software summary, grouped by name and version
	"internal/domains/incidents": 1, // the feed: deep offset pages picked from the index, totals kept by triggers
	"internal/domains/search":    1, // the tag list, grouped by tag
}

func TestNoOwnPagers(t *testing.T) {
	fset, files := serverFiles(t, "internal/platform/store")
	checkShrinkOnly(t, "pagerDebt", pagerDebt, occurrences(fset, files, ownPagers), "functions paging by hand",
		"store.List, store.KeysetList, store.SeekPage or store.RankedList, which make and read the cursors")
}

// clockDebt counts the uses of time.Now and store.Now.
var clockDebt = map[string]int{
	"internal/domains/agenthub":    1, // heartbeat latency, a duration
	"internal/domains/audit":       1, // Record, which every domain calls in its transaction without a clock
	"internal/domains/auth":        6, // JWT and TOTP checks against real time, the sign-in floor, SetPassword for the command line
	"internal/domains/identity":    1, // CreateUser for the command line and the test kit
	"internal/domains/remote":      1, // a read deadline on a live stream
	"internal/domains/systemtools": 1, // a read deadline on a live stream
	"internal/domains/tunnels":     1, // a read deadline on a live stream
	"internal/domains/webhooks":    1, // the duration of a delivery request
	"internal/platform/events":     5, // event stamps and the delivery window: Record has no clock, so events stay on wall time
	"internal/platform/httpapi":    1, // request timing, a duration
	"internal/platform/mail":       1, // the Date header
	"internal/platform/nodes":      6, // liveness of real processes and signatures between nodes
}

func TestServerTimeComesFromTheClock(t *testing.T) {
	fset, files := serverFiles(t, "internal/platform/store", "internal/platform/clock")
	checkShrinkOnly(t, "clockDebt", clockDebt, occurrences(fset, files, clockReads), "uses of time.Now or store.Now",
		"the module's clock.Clock (k.Clock), handed to the service")
}

// byIDDebt counts the functions that read one row by ID by hand (sql.ErrNoRows to
// apperr.NotFound).
var byIDDebt = map[string]int{}

func TestNoHandWrittenByIDReads(t *testing.T) {
	fset, files := serverFiles(t, "internal/platform/store")
	checkShrinkOnly(t, "byIDDebt", byIDDebt, occurrences(fset, files, byIDBodies), "hand-written reads by ID",
		"store.ByID")
}

// foreignCallDebt counts the calls of another domain's package-level functions that take a
// database handle, given the caller's database instead of its transaction: such a function is
// the other domain's API for work inside the caller's transaction; outside one, its service is.
var foreignCallDebt = map[string]int{}

func TestDomainsReachOtherDomainsThroughTheirServices(t *testing.T) {
	fset, files := serverFiles(t)
	byPkg := map[string][]*ast.File{}
	for _, f := range files {
		byPkg[f.pkg] = append(byPkg[f.pkg], f.ast)
	}
	handles := map[string]map[string]bool{}
	for pkg, pkgFiles := range byPkg {
		if domainOf(pkg) != "" {
			handles["gale/"+pkg] = dbHandleFuncs(pkgFiles)
		}
	}
	var domains []goFile
	for _, f := range files {
		if domainOf(f.pkg) != "" {
			domains = append(domains, f)
		}
	}
	found := occurrences(fset, domains, func(f *ast.File) []token.Pos { return foreignDBCalls(f, handles) })
	checkShrinkOnly(t, "foreignCallDebt", foreignCallDebt, found, "calls of other domains' functions taking a database handle",
		"a method of the other domain's *Service, or the function inside your transaction")
}

// importDebt counts the imports against the direction of the layers.
var importDebt = map[string]int{}

func TestImportsFollowTheLayers(t *testing.T) {
	fset, all := sourceFiles(t)
	place := map[string]int{}
	for _, f := range all {
		if f.pkg == "internal/app" {
			for i, path := range moduleOrder(f.ast) {
				place[path] = i
			}
		}
	}
	found, unlisted := map[string][]string{}, map[string]bool{}
	for _, f := range all {
		if !within(f.pkg, []string{domainsDir, "internal/platform", "internal/wire"}) {
			continue
		}
		if _, listed := place[domainOf(f.pkg)]; domainOf(f.pkg) != "" && !listed && !unlisted[f.pkg] {
			unlisted[f.pkg] = true
			t.Errorf("%s is not in Modules (internal/app/app.go); add it after the modules it uses", f.pkg)
		}
		for _, pos := range importsAgainstTheGrain(f.pkg, f.ast, place) {
			found[f.pkg] = append(found[f.pkg], fset.Position(pos).String())
		}
	}
	checkShrinkOnly(t, "importDebt", importDebt, found, "imports against the layers",
		"only imports along the layers (a domain: domains before it in Modules; internal/platform: no domain nor "+
			"internal/app; internal/wire: wire packages and the agent's libraries)")
}

// TestTheConsoleNeverQueries keeps the console's pages on the domain services: a page that
// ran its own SQL would skip the rules (scope, permissions) the services apply.
func TestTheConsoleNeverQueries(t *testing.T) {
	fset, files := serverFiles(t)
	var console []goFile
	for _, f := range files {
		if within(f.pkg, []string{"internal/console"}) {
			console = append(console, f)
		}
	}
	for pkg, places := range occurrences(fset, console, databaseCalls) {
		t.Errorf("%s reads or writes the database itself at %s: call the domain's service", pkg, strings.Join(places, ", "))
	}
}
