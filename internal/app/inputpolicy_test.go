package app_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gale/internal/testkit/apptest"
)

// policySchema is the part of a JSON schema the input policy tests read.
type policySchema struct {
	Ref        string                   `json:"$ref"`
	Type       any                      `json:"type"`
	Format     string                   `json:"format"`
	Enum       []any                    `json:"enum"`
	Required   []string                 `json:"required"`
	Properties map[string]*policySchema `json:"properties"`
}

// kind is the schema's type, the first non-null one when huma lists several.
func (s *policySchema) kind() string {
	switch t := s.Type.(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if x != "null" {
				return x.(string)
			}
		}
	}
	return ""
}

type policyOperation struct {
	OperationID string                `json:"operationId"`
	Security    []map[string][]string `json:"security"`
	Parameters  []struct {
		Name   string        `json:"name"`
		In     string        `json:"in"`
		Schema *policySchema `json:"schema"`
	} `json:"parameters"`
	RequestBody *struct {
		Content map[string]struct {
			Schema *policySchema `json:"schema"`
		} `json:"content"`
	} `json:"requestBody"`
}

type policyDoc struct {
	Paths      map[string]map[string]*policyOperation `json:"paths"`
	Components struct {
		Schemas map[string]*policySchema `json:"schemas"`
	} `json:"components"`
}

func (d *policyDoc) resolve(s *policySchema) *policySchema {
	for s != nil && s.Ref != "" {
		s = d.Components.Schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
	}
	return s
}

// validID is what path parameters that name resources are given: well formed, unknown.
const validID = "0190a0a0-0000-7000-8000-000000000001"

var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

// fillPath puts a plausible value in each path parameter.
func fillPath(path string, op *policyOperation) string {
	return pathParam.ReplaceAllStringFunc(path, func(m string) string {
		name := strings.Trim(m, "{}")
		for _, p := range op.Parameters {
			if p.In == "path" && p.Name == name && p.Schema != nil {
				switch {
				case len(p.Schema.Enum) > 0:
					if s, ok := p.Schema.Enum[0].(string); ok {
						return s
					}
				case p.Schema.kind() == "integer":
					return "1"
				case p.Schema.Format == "uuid":
					return validID
				}
			}
		}
		return "a"
	})
}

// zero is a valid-looking value of a schema that is not a string.
func zero(s *policySchema) any {
	switch s.kind() {
	case "integer", "number":
		return 0
	case "boolean":
		return false
	case "array":
		return []any{}
	case "object":
		return map[string]any{}
	}
	return nil
}

// nulBody is a body with a NUL in every top-level string property (and zero-ish values in
// the other required ones), or in an extra property when the schema has no string.
func nulBody(d *policyDoc, schema *policySchema) (map[string]any, []string) {
	body := map[string]any{}
	var stringProps []string
	if s := d.resolve(schema); s != nil {
		for name, p := range s.Properties {
			p = d.resolve(p)
			if p.kind() == "string" {
				body[name] = "a\u0000b"
				stringProps = append(stringProps, name)
			} else if slices.Contains(s.Required, name) {
				body[name] = zero(p)
			}
		}
	}
	if len(stringProps) == 0 {
		body["x"] = "\u0000"
		stringProps = []string{"x"}
	}
	return body, stringProps
}

type policyError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details []struct {
			Field string `json:"field"`
		} `json:"details"`
	} `json:"error"`
}

func loadPolicyDoc(t *testing.T, e *apptest.Env) *policyDoc {
	t.Helper()
	var doc policyDoc
	e.Must(200, apptest.Anonymous, "GET", "/api/v1/openapi.json", nil).JSON(t, &doc)
	return &doc
}

func byServicePrincipal(op *policyOperation) bool {
	for _, s := range op.Security {
		if _, ok := s["servicePrincipalKey"]; ok {
			return true
		}
	}
	return false
}

// agentOperations keep only the depth rule: what agents report is cleaned, not refused.
var agentOperations = []string{"enroll-agent", "agent-heartbeat", "agent-inventory", "agent-command-result"}

// TestEveryWriteRefusesNUL sends each write operation of the OpenAPI document a body with a
// NUL in its strings, as the system administrator: each answers 400 VALIDATION_ERROR naming
// one of those fields before anything reaches the database, so the answer is the same on
// SQLite and PostgreSQL. Agents' operations and the partner API (which takes no session)
// answer another 4xx; none answers 500.
func TestEveryWriteRefusesNUL(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	doc := loadPolicyDoc(t, e)
	sent := 0
	for path, methods := range doc.Paths {
		for method, op := range methods {
			if method != "post" && method != "put" && method != "patch" || op.RequestBody == nil {
				continue
			}
			body, fields := nulBody(doc, op.RequestBody.Content["application/json"].Schema)
			target := "/api/v1" + fillPath(path, op)
			r := e.Do(admin, strings.ToUpper(method), target, body)
			sent++
			var env policyError
			_ = json.Unmarshal(r.Body, &env)
			if r.Status < 400 || r.Status >= 500 || env.Error.Code == "" || env.Error.Message == "" {
				t.Errorf("%s %s (%s) with NUL = %d %s, want a 4xx in the envelope", method, target, op.OperationID, r.Status, r.Body)
				continue
			}
			if slices.Contains(agentOperations, op.OperationID) || byServicePrincipal(op) {
				continue
			}
			if r.Status != 400 || env.Error.Code != "VALIDATION_ERROR" || len(env.Error.Details) != 1 ||
				!slices.Contains(fields, env.Error.Details[0].Field) {
				t.Errorf("%s %s (%s) with NUL in %v = %d %s, want 400 VALIDATION_ERROR naming one of them",
					method, target, op.OperationID, fields, r.Status, r.Body)
			}
		}
	}
	t.Logf("%d write operations with a body", sent)
	if sent < 50 {
		t.Fatalf("only %d write operations with a body in the OpenAPI document", sent)
	}
}

// TestOperationsWithoutBodyRefuseOne: every POST without a request body refuses a large, a
// text and a malformed body; none succeeds.
func TestOperationsWithoutBodyRefuseOne(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	doc := loadPolicyDoc(t, e)
	bodies := []struct{ contentType, body string }{
		{"application/json", `{"a":"` + strings.Repeat("x", 2<<20) + `"}`},
		{"text/plain", "rotate please"},
		{"application/json", `{"a":`},
	}
	checked := 0
	for path, methods := range doc.Paths {
		op := methods["post"]
		if op == nil || op.RequestBody != nil {
			continue
		}
		checked++
		for _, b := range bodies {
			status, raw := sendRaw(t, e, admin, "POST", "/api/v1"+fillPath(path, op), b.contentType, b.body)
			var env policyError
			_ = json.Unmarshal(raw, &env)
			if status < 400 || status >= 500 || env.Error.Code == "" {
				t.Errorf("POST %s (%s) with a %s body of %d bytes = %d %s, want a 4xx", path, op.OperationID, b.contentType,
					len(b.body), status, raw)
			}
			if !byServicePrincipal(op) && (status != 400 || env.Error.Message != "this operation takes no request body") {
				t.Errorf("POST %s (%s) with a %s body = %d %s, want 400: it takes no body", path, op.OperationID, b.contentType, status, raw)
			}
		}
	}
	t.Logf("%d POST operations without a body", checked)
	if checked < 5 {
		t.Fatalf("only %d POST operations without a body", checked)
	}
}

func sendRaw(t *testing.T, e *apptest.Env, c apptest.Caller, method, path, contentType, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.Server.URL+path, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	res, err := e.Server.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, raw
}

// TestInputPolicyRules: one case of each rule through the real server.
func TestInputPolicyRules(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Alpha")
	field := func(r *apptest.Response) string {
		var env policyError
		_ = json.Unmarshal(r.Body, &env)
		if len(env.Error.Details) == 0 {
			return ""
		}
		return env.Error.Details[0].Field
	}

	deep := `{"name":"Deep","settings":{"a":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}}`
	if r := e.Do(admin, "POST", "/api/v1/orgs/organizations", deep); r.Status != 400 || r.ErrorCode() != "VALIDATION_ERROR" {
		t.Errorf("settings nested 5000 levels = %d %s, want 400", r.Status, r.Body)
	}
	if r := e.Do(admin, "POST", "/api/v1/orgs/organizations", map[string]any{"name": "Acme\x1b[2J"}); r.Status != 400 || field(r) != "name" {
		t.Errorf("an escape sequence in an organization name = %d %s, want 400 on name", r.Status, r.Body)
	}
	if r := e.Do(admin, "POST", "/api/v1/orgs/organizations", map[string]any{"name": "Acme", "settings": map[string]any{"k": "a\u0000b"}}); r.Status != 400 || field(r) != "settings.k" {
		t.Errorf("NUL in free-form settings = %d %s, want 400 on settings.k", r.Status, r.Body)
	}
	e.Must(201, ten.Partner, "POST", "/api/v1/groups", map[string]any{"orgId": ten.OrgID, "name": "Web", "type": "static",
		"description": "Web servers.\nPatched on Tuesdays.\tAsk ops."})
	if r := e.Do(ten.Partner, "POST", "/api/v1/groups", map[string]any{"orgId": ten.OrgID, "name": "Web\nservers", "type": "static"}); r.Status != 400 || field(r) != "name" {
		t.Errorf("a newline in a group name = %d %s, want 400 on name", r.Status, r.Body)
	}
	if r := e.Do(admin, "GET", "/api/v1/orgs/organizations?search=a%00b", nil); r.Status != 400 || field(r) != "search" {
		t.Errorf("NUL in a query parameter = %d %s, want 400 on search", r.Status, r.Body)
	}
	if r := e.Do(admin, "GET", "/api/v1/orgs/organizations/a%00b", nil); r.Status != 400 || r.ErrorCode() != "VALIDATION_ERROR" {
		t.Errorf("NUL in a path parameter = %d %s, want 400", r.Status, r.Body)
	}
	r := e.Do(admin, "GET", "/api/v1/orgs/organizations", nil)
	for k, want := range map[string]string{"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
		"Referrer-Policy": "no-referrer"} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	res, err := e.Server.Client().Get(e.Server.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("/health headers = %v", res.Header)
	}
}
