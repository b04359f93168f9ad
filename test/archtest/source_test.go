package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// goFile is one parsed Go file of the module (test files left out).
type goFile struct {
	pkg string // its directory, relative to the module root, with slashes
	ast *ast.File
}

// parsed holds the module's files, parsed once for all the tests.
var parsed struct {
	once  sync.Once
	fset  *token.FileSet
	files []goFile
	err   error
}

// sourceFiles returns the parsed non-test Go files under internal/ and cmd/.
func sourceFiles(t *testing.T) (*token.FileSet, []goFile) {
	t.Helper()
	root := moduleRoot(t)
	parsed.once.Do(func() {
		parsed.fset = token.NewFileSet()
		for _, top := range []string{"internal", "cmd"} {
			err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if d.IsDir() {
					if d.Name() == "testdata" {
						return filepath.SkipDir
					}
					return nil
				}
				if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
					return nil
				}
				f, err := parser.ParseFile(parsed.fset, path, nil, parser.SkipObjectResolution)
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(root, filepath.Dir(path))
				parsed.files = append(parsed.files, goFile{pkg: filepath.ToSlash(rel), ast: f})
				return nil
			})
			if err != nil {
				parsed.err = err
				return
			}
		}
	})
	if parsed.err != nil {
		t.Fatal(parsed.err)
	}
	return parsed.fset, parsed.files
}

// serverDirs hold the server's code, which the guards check; the agent and the test support
// are not the server's.
var serverDirs = []string{"internal/app", "internal/platform", "internal/domains", "internal/console", "cmd/gale"}

// serverFiles returns the parsed files of the server's packages, less those under skip.
func serverFiles(t *testing.T, skip ...string) (*token.FileSet, []goFile) {
	t.Helper()
	fset, all := sourceFiles(t)
	var out []goFile
	for _, f := range all {
		if within(f.pkg, serverDirs) && !within(f.pkg, skip) {
			out = append(out, f)
		}
	}
	return fset, out
}

// imports maps the names a file gives its imports to their paths.
func imports(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, spec := range f.Imports {
		path, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			continue
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if spec.Name != nil {
			name = spec.Name.Name
		}
		out[name] = path
	}
	return out
}

// isPkgSel reports whether e is pkg.name, pkg being the import of path under the name the
// file gives it.
func isPkgSel(imps map[string]string, e ast.Expr, path, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && imps[x.Name] == path
}

// methodName returns the name of the function or method a call calls (generic or not), or "".
func methodName(call *ast.CallExpr) string {
	fun := call.Fun
	switch f := fun.(type) {
	case *ast.IndexExpr:
		fun = f.X
	case *ast.IndexListExpr:
		fun = f.X
	}
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// stringLits returns the values of the string literals under n.
func stringLits(n ast.Node) []string {
	var out []string
	ast.Inspect(n, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil {
				out = append(out, s)
			}
		}
		return true
	})
	return out
}

// funcDecls returns the functions and methods a file declares.
func funcDecls(f *ast.File) []*ast.FuncDecl {
	var out []*ast.FuncDecl
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Body != nil {
			out = append(out, fn)
		}
	}
	return out
}

// occurrences runs a detector over files and returns, per package, the places it found.
func occurrences(fset *token.FileSet, files []goFile, detect func(*ast.File) []token.Pos) map[string][]string {
	found := map[string][]string{}
	for _, f := range files {
		for _, pos := range detect(f.ast) {
			found[f.pkg] = append(found[f.pkg], fset.Position(pos).String())
		}
	}
	return found
}

// checkShrinkOnly compares what a guard found (per package, the places) with its list of
// allowed counts, named list. A package over its count has a new occurrence: use instead. A
// package under its count has paid some off: its entry must go down, so the list only shrinks.
func checkShrinkOnly(t *testing.T, list string, allowed map[string]int, found map[string][]string, what, instead string) {
	t.Helper()
	for _, pkg := range slices.Sorted(maps.Keys(found)) {
		if places := found[pkg]; len(places) > allowed[pkg] {
			t.Errorf("%s has %d %s, %s allows %d; use %s instead:\n\t%s", pkg, len(places), what, list, allowed[pkg],
				instead, strings.Join(places, "\n\t"))
		}
	}
	for _, pkg := range slices.Sorted(maps.Keys(allowed)) {
		if n := len(found[pkg]); n < allowed[pkg] {
			fix := fmt.Sprintf("lower its number in %s to %d", list, n)
			if n == 0 {
				fix = "remove its entry from " + list
			}
			t.Errorf("%s has %d %s, fewer than the %d %s allows: %s, so that the list only shrinks", pkg, n, what,
				allowed[pkg], list, fix)
		}
	}
}
