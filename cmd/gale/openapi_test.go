package main

import (
	"encoding/json"
	"os"
	"testing"
)

// gale openapi prints the whole document without the configured database, and leaves no
// file behind.
func TestOpenAPICommandNeedsNoDatabase(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://nowhere.invalid/gale")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	out, err := gale(t, "openapi")
	if err != nil {
		t.Fatalf("gale openapi: %v", err)
	}
	var doc struct {
		OpenAPI string                     `json:"openapi"`
		Paths   map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("output is not JSON: %v", err)
	}
	if doc.OpenAPI != "3.1.0" || doc.Paths["/orgs/organizations"] == nil || doc.Paths["/orgs"] == nil {
		t.Fatalf("document %s has %d paths, want the server's", doc.OpenAPI, len(doc.Paths))
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Fatalf("gale openapi left %d entries in the temporary directory", len(left))
	}
}
