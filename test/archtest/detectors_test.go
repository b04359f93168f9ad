package archtest

import (
	"go/ast"
	"go/token"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Import paths the detectors look for.
const (
	sqlPath    = "database/sql"
	timePath   = "time"
	storePath  = "gale/internal/platform/store"
	apperrPath = "gale/internal/platform/apperr"
	domainsDir = "internal/domains"
)

// queryMethods run a query of many rows and return its *sql.Rows.
var queryMethods = map[string]bool{"Query": true, "QueryContext": true, "TxQueryContext": true}

// rowLoops finds the loops over a query's rows (for rows.Next()), rows being a *sql.Rows: a
// variable, parameter or field declared so, or the result of a Query, QueryContext or
// TxQueryContext call.
func rowLoops(f *ast.File) []token.Pos {
	imps := imports(f)
	rows := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			if call, ok := n.Rhs[0].(*ast.CallExpr); ok && len(n.Rhs) == 1 && queryMethods[methodName(call)] {
				if id, ok := n.Lhs[0].(*ast.Ident); ok {
					rows[id.Name] = true
				}
			}
		case *ast.Field:
			if isSQLRows(imps, n.Type) {
				for _, name := range n.Names {
					rows[name.Name] = true
				}
			}
		case *ast.ValueSpec:
			if isSQLRows(imps, n.Type) {
				for _, name := range n.Names {
					rows[name.Name] = true
				}
			}
		}
		return true
	})
	var out []token.Pos
	ast.Inspect(f, func(n ast.Node) bool {
		loop, ok := n.(*ast.ForStmt)
		if !ok {
			return true
		}
		if call, ok := loop.Cond.(*ast.CallExpr); ok && len(call.Args) == 0 {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Next" {
				if id, ok := sel.X.(*ast.Ident); ok && rows[id.Name] {
					out = append(out, loop.Pos())
				}
			}
		}
		return true
	})
	return out
}

func isSQLRows(imps map[string]string, e ast.Expr) bool {
	star, ok := e.(*ast.StarExpr)
	return ok && isPkgSel(imps, star.X, sqlPath, "Rows")
}

var (
	sqlLimit  = regexp.MustCompile(`\bLIMIT\b`)
	sqlOffset = regexp.MustCompile(`\bOFFSET\b`)
)

// ownPagers finds the functions that page by hand: they make or read a list cursor
// (store.EncodeCursor, store.DecodeCursor), read one row past a page to learn whether another
// follows (a LIMIT of limit+1), or skip rows with an OFFSET of their own.
func ownPagers(f *ast.File) []token.Pos {
	imps := imports(f)
	var out []token.Pos
	for _, fn := range funcDecls(f) {
		paged := false
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				paged = paged || isPkgSel(imps, n.Fun, storePath, "EncodeCursor") ||
					isPkgSel(imps, n.Fun, storePath, "DecodeCursor") || limitPastPage(n)
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					s, _ := strconv.Unquote(n.Value)
					paged = paged || sqlOffset.MatchString(s)
				}
			}
			return !paged
		})
		if paged {
			out = append(out, fn.Pos())
		}
	}
	return out
}

// limitPastPage reports whether a call's arguments write a LIMIT of limit+1 (limit being a
// variable or field of that name).
func limitPastPage(call *ast.CallExpr) bool {
	hasLimit, plusOne := false, false
	for _, arg := range call.Args {
		for _, s := range stringLits(arg) {
			hasLimit = hasLimit || sqlLimit.MatchString(s)
		}
		ast.Inspect(arg, func(n ast.Node) bool {
			if b, ok := n.(*ast.BinaryExpr); ok && b.Op == token.ADD && isLimit(b.X) {
				if one, ok := b.Y.(*ast.BasicLit); ok && one.Value == "1" {
					plusOne = true
				}
			}
			return true
		})
	}
	return hasLimit && plusOne
}

func isLimit(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return strings.EqualFold(e.Name, "limit")
	case *ast.SelectorExpr:
		return strings.EqualFold(e.Sel.Name, "limit")
	}
	return false
}

// clockReads finds the uses of time.Now and store.Now, called or passed as a function.
func clockReads(f *ast.File) []token.Pos {
	imps := imports(f)
	var out []token.Pos
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && (isPkgSel(imps, sel, timePath, "Now") || isPkgSel(imps, sel, storePath, "Now")) {
			out = append(out, sel.Pos())
		}
		return true
	})
	return out
}

// rowMethods run a query of one row.
var rowMethods = map[string]bool{"QueryRow": true, "QueryRowContext": true, "TxQueryRowContext": true}

// byIDCondition is SQL selecting a row by its ID: "id = $1", or "id = " followed by a
// placeholder from store.Args.
var byIDCondition = regexp.MustCompile(`\bid\s*=\s*(\$\d|$)`)

// byIDBodies finds the functions that read one row by its ID by hand: they run a one-row
// SELECT by "id = $n" and answer sql.ErrNoRows with apperr.NotFound.
func byIDBodies(f *ast.File) []token.Pos {
	imps := imports(f)
	var out []token.Pos
	for _, fn := range funcDecls(f) {
		if readsRowByID(fn.Body) && notFoundOnNoRows(imps, fn.Body) {
			out = append(out, fn.Pos())
		}
	}
	return out
}

// readsRowByID reports whether a body runs a one-row SELECT by "id = $n", written in the
// query's SQL or in a variable the query takes (conditions built before it).
func readsRowByID(body *ast.BlockStmt) bool {
	assigned := map[string][]ast.Expr{}
	ast.Inspect(body, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == len(as.Rhs) {
			for i, lhs := range as.Lhs {
				if id, ok := lhs.(*ast.Ident); ok {
					assigned[id.Name] = append(assigned[id.Name], as.Rhs[i])
				}
			}
		}
		return true
	})
	byID := func(e ast.Expr) bool { return slices.ContainsFunc(stringLits(e), byIDCondition.MatchString) }
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || found || !rowMethods[methodName(call)] || !selects(call) {
			return !found
		}
		for _, arg := range call.Args {
			ast.Inspect(arg, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok {
					found = found || slices.ContainsFunc(assigned[id.Name], byID)
				}
				return true
			})
			found = found || byID(arg)
		}
		return !found
	})
	return found
}

// notFoundOnNoRows reports whether a body has an "if" on sql.ErrNoRows that returns
// apperr.NotFound.
func notFoundOnNoRows(imps map[string]string, body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		ifs, ok := n.(*ast.IfStmt)
		if !ok || found || !mentions(imps, ifs.Cond, sqlPath, "ErrNoRows") {
			return !found
		}
		for _, st := range ifs.Body.List {
			if ret, ok := st.(*ast.ReturnStmt); ok {
				for _, r := range ret.Results {
					if call, ok := r.(*ast.CallExpr); ok && isPkgSel(imps, call.Fun, apperrPath, "NotFound") {
						found = true
					}
				}
			}
		}
		return !found
	})
	return found
}

// mentions reports whether pkg.name (pkg the import of path) occurs under n.
func mentions(imps map[string]string, n ast.Node, path, name string) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if e, ok := n.(ast.Expr); ok && isPkgSel(imps, e, path, name) {
			found = true
		}
		return !found
	})
	return found
}

// selects reports whether a query call's SQL (its first string literal) is a SELECT.
func selects(call *ast.CallExpr) bool {
	for _, arg := range call.Args {
		if lits := stringLits(arg); len(lits) > 0 {
			return strings.HasPrefix(strings.TrimSpace(lits[0]), "SELECT")
		}
	}
	return false
}

// takesDBHandle reports whether a function has a parameter that is a database handle:
// *store.DB, *sql.Tx, *sql.DB or store.Querier.
func takesDBHandle(imps map[string]string, fn *ast.FuncType) bool {
	for _, p := range fn.Params.List {
		t := p.Type
		if star, ok := t.(*ast.StarExpr); ok {
			if isPkgSel(imps, star.X, storePath, "DB") || isPkgSel(imps, star.X, sqlPath, "Tx") || isPkgSel(imps, star.X, sqlPath, "DB") {
				return true
			}
		} else if isPkgSel(imps, t, storePath, "Querier") {
			return true
		}
	}
	return false
}

// dbHandleFuncs returns the exported package-level functions of a package (its files) that
// take a database handle.
func dbHandleFuncs(files []*ast.File) map[string]bool {
	out := map[string]bool{}
	for _, f := range files {
		imps := imports(f)
		for _, fn := range funcDecls(f) {
			if fn.Recv == nil && fn.Name.IsExported() && takesDBHandle(imps, fn.Type) {
				out[fn.Name.Name] = true
			}
		}
	}
	return out
}

// foreignDBCalls finds calls of another domain's functions that take a database handle and
// are given the caller's database rather than its transaction; handles maps an import path to
// the names of those functions. A domain's package-level functions that take a handle are its
// API for work inside the caller's transaction (audit.Record, tenancy.Place, devices.Owners);
// called with the database itself they reach into its tables around its service.
func foreignDBCalls(f *ast.File, handles map[string]map[string]bool) []token.Pos {
	imps := imports(f)
	var out []token.Pos
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		fun := call.Fun
		switch g := fun.(type) {
		case *ast.IndexExpr:
			fun = g.X
		case *ast.IndexListExpr:
			fun = g.X
		}
		if sel, ok := fun.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && handles[imps[x.Name]][sel.Sel.Name] && slices.ContainsFunc(call.Args, isDatabase) {
				out = append(out, call.Pos())
			}
		}
		return true
	})
	return out
}

// isDatabase reports whether an argument names the caller's database (db, s.db, k.DB) rather
// than a transaction.
func isDatabase(arg ast.Expr) bool {
	switch a := arg.(type) {
	case *ast.Ident:
		return a.Name == "db"
	case *ast.SelectorExpr:
		return a.Sel.Name == "db" || a.Sel.Name == "DB"
	}
	return false
}

// moduleOrder returns the import paths of the modules that the Modules list of app.go (f)
// names, in its order.
func moduleOrder(f *ast.File) []string {
	imps := imports(f)
	var out []string
	for _, d := range f.Decls {
		gen, ok := d.(*ast.GenDecl)
		if !ok || gen.Tok != token.VAR {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if name.Name != "Modules" || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.CompositeLit)
				if !ok {
					continue
				}
				for _, elt := range lit.Elts {
					if sel, ok := elt.(*ast.SelectorExpr); ok && sel.Sel.Name == "Module" {
						if x, ok := sel.X.(*ast.Ident); ok {
							out = append(out, imps[x.Name])
						}
					}
				}
			}
		}
	}
	return out
}

// domainOf returns the import path of the domain a package directory belongs to, or "".
func domainOf(pkg string) string {
	rest, ok := strings.CutPrefix(pkg, domainsDir+"/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return "gale/" + domainsDir + "/" + name
}

// importsAgainstTheGrain finds the imports of a file of package directory pkg that go
// against the direction of the layers: a domain imports only domains built before it (order
// maps a domain's import path to its place in Modules); a platform package imports no domain
// and not the wiring; a wire package imports, besides the standard library, only wire packages
// and libraries the agent may carry (agentLibraries).
func importsAgainstTheGrain(pkg string, f *ast.File, order map[string]int) []token.Pos {
	var out []token.Pos
	for _, spec := range f.Imports {
		path, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			continue
		}
		var bad bool
		switch {
		case domainOf(pkg) != "":
			self, imported := domainOf(pkg), ""
			if rest, ok := strings.CutPrefix(path, "gale/"); ok {
				imported = domainOf(rest)
			}
			if imported != "" && imported != self {
				at, known := order[imported]
				mine, placed := order[self]
				bad = !known || !placed || at > mine
			}
		case within(pkg, []string{"internal/platform"}):
			bad = within(path, []string{"gale/" + domainsDir, "gale/internal/app"})
		case within(pkg, []string{"internal/wire"}):
			first, _, _ := strings.Cut(path, "/")
			bad = strings.Contains(first, ".") && !within(path, agentLibraries) ||
				first == "gale" && !within(path, []string{"gale/internal/wire"})
		}
		if bad {
			out = append(out, spec.Pos())
		}
	}
	return out
}

// sqlMethods run SQL on a database handle or transaction, or begin one; called with no
// argument they are something else (url.URL.Query).
var sqlMethods = map[string]bool{"Query": true, "QueryContext": true, "QueryRow": true, "QueryRowContext": true,
	"Exec": true, "ExecContext": true, "BeginTx": true}

// databaseCalls finds SQL run directly: the query methods of database/sql, and the store's
// readers and transactions.
func databaseCalls(f *ast.File) []token.Pos {
	imps := imports(f)
	var out []token.Pos
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && imps[id.Name] == storePath {
			switch sel.Sel.Name {
			case "QueryAll", "QueryStrings", "ByID", "List", "CachedList", "KeysetList", "RankedList":
				out = append(out, call.Pos())
			}
			return true
		}
		if sqlMethods[sel.Sel.Name] && len(call.Args) > 0 || sel.Sel.Name == "Write" && len(call.Args) == 2 {
			out = append(out, call.Pos())
		}
		return true
	})
	return out
}
