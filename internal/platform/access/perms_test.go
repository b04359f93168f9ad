package access

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"
)

// perms.go names every catalog permission once, and nothing else.
func TestPermConstantsMatchTheCatalog(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "perms.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	constants := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Values) == 1 {
			if lit, ok := vs.Values[0].(*ast.BasicLit); ok {
				v, _ := strconv.Unquote(lit.Value)
				if constants[v] {
					t.Errorf("%s is named twice", v)
				}
				constants[v] = true
				if !Known(Perm(v)) {
					t.Errorf("constant %s = %q is not in the catalog", vs.Names[0].Name, v)
				}
			}
		}
		return true
	})
	for _, p := range Catalog() {
		if !constants[p.Name] {
			t.Errorf("catalog permission %s has no constant", p.Name)
		}
	}
	if Known("devices:reed") {
		t.Error("a misspelt permission is known")
	}
}
