package app_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"gale/internal/testkit/apptest"
)

type operation struct {
	OperationID string                     `json:"operationId"`
	Description string                     `json:"description"`
	Summary     string                     `json:"summary"`
	Tags        []string                   `json:"tags"`
	Security    []map[string][]string      `json:"security"`
	Responses   map[string]json.RawMessage `json:"responses"`
}

func openAPI(t *testing.T) map[string]map[string]operation {
	t.Helper()
	e := apptest.New(t)
	var doc struct {
		Paths map[string]map[string]operation `json:"paths"`
	}
	e.Must(200, apptest.Anonymous, "GET", "/api/v1/openapi.json", nil).JSON(t, &doc)
	return doc.Paths
}

func TestOpenAPIDescribesEveryOperation(t *testing.T) {
	seen := map[string]bool{}
	for path, methods := range openAPI(t) {
		for method, op := range methods {
			if op.OperationID == "" || op.Summary == "" || len(op.Tags) == 0 {
				t.Errorf("%s %s lacks an operationId, summary or tag", method, path)
			}
			if seen[op.OperationID] {
				t.Errorf("operationId %s used twice", op.OperationID)
			}
			seen[op.OperationID] = true
			if len(op.Security) > 0 {
				for _, code := range []string{"401", "403"} {
					if _, ok := op.Responses[code]; !ok {
						t.Errorf("%s %s does not document %s", method, path, code)
					}
				}
			}
			if _, ok := op.Responses["422"]; ok {
				t.Errorf("%s %s documents 422; errors of validation are 400", method, path)
			}
		}
	}
}

// A path parameter that names nothing the caller can see is answered 404, so every operation
// whose path has one documents it.
func TestOperationsWithAPathParameterDocument404(t *testing.T) {
	n := 0
	for path, methods := range openAPI(t) {
		if !strings.Contains(path, "{") {
			continue
		}
		for method, op := range methods {
			n++
			if _, ok := op.Responses["404"]; !ok {
				t.Errorf("%s %s (%s) has a path parameter and does not document 404", method, path, op.OperationID)
			}
		}
	}
	if n == 0 {
		t.Fatal("no operation has a path parameter")
	}
}

// Two paths that differ only in their parameters' names are one path to a router and an error
// to OpenAPI linters; the second must reuse the first's names.
func TestOpenAPIPathsDifferBeyondParameterNames(t *testing.T) {
	param := regexp.MustCompile(`\{[^}]+\}`)
	shapes := map[string]string{}
	for path := range openAPI(t) {
		shape := param.ReplaceAllString(path, "{}")
		if other, ok := shapes[shape]; ok {
			t.Errorf("%s and %s differ only in parameter names", other, path)
		}
		shapes[shape] = path
	}
}

// docs/authentication.md lists exactly the operations whose routes declare the MFA gate.
func TestMFAGatedOperationsAreDocumented(t *testing.T) {
	gated := map[string]bool{}
	for _, methods := range openAPI(t) {
		for _, op := range methods {
			if strings.Contains(op.Description, "MFA-gated:") {
				gated[op.OperationID] = true
			}
		}
	}
	doc, err := os.ReadFile("../../docs/authentication.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)[strings.Index(string(doc), "## MFA-gated operations"):]
	if i := strings.Index(section[3:], "\n## "); i >= 0 {
		section = section[:i+3]
	}
	documented := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		if id, ok := strings.CutPrefix(line, "| `"); ok {
			documented[id[:strings.Index(id, "`")]] = true
		}
	}
	if len(gated) < 30 {
		t.Fatalf("only %d operations are MFA-gated", len(gated))
	}
	for id := range gated {
		if !documented[id] {
			t.Errorf("MFA-gated operation %s is missing from docs/authentication.md", id)
		}
	}
	for id := range documented {
		if !gated[id] {
			t.Errorf("docs/authentication.md lists %s, which is not MFA-gated", id)
		}
	}
}

// Every signed-in operation names its permission, except those that act only on the caller's
// own account.
func TestEveryOperationChecksAPermission(t *testing.T) {
	self := map[string]bool{"get-me": true, "update-me": true, "mfa-setup": true, "mfa-enable": true,
		"mfa-disable": true, "mfa-recovery-codes": true, "mfa-step-up": true, "change-password": true,
		// The caller's own notifications and phone push tokens.
		"list-notifications": true, "count-unread-notifications": true, "mark-notification": true, "delete-notification": true,
		"clear-notifications": true, "mobile-register-push": true, "mobile-unregister-push": true}
	for path, methods := range openAPI(t) {
		for method, op := range methods {
			if len(op.Security) == 0 || self[op.OperationID] {
				continue
			}
			if !strings.Contains(op.Description, "Requires permission `") && !strings.Contains(op.Description, "Requires service-principal scope `") {
				t.Errorf("%s %s (%s) names no permission", method, path, op.OperationID)
			}
		}
	}
}
