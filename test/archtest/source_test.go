package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
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
