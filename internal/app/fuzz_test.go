package app_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"gale/internal/testkit/apptest"
)

// createRoutes are the POST routes that create something from a caller's body; the fuzzer
// feeds each of them arbitrary bytes.
var createRoutes = []string{
	"/api/v1/orgs/partners",
	"/api/v1/orgs/organizations",
	"/api/v1/orgs/sites",
	"/api/v1/users/invite",
	"/api/v1/roles",
	"/api/v1/access-reviews",
	"/api/v1/api-keys",
	"/api/v1/auth/login",
	"/api/v1/auth/refresh",
	"/api/v1/auth/accept-invite",
	"/api/v1/auth/mfa/verify",
	"/api/v1/audit/export",
}

var fuzzSeeds = []string{
	`{}`, `[]`, `null`, `""`, `0`, `{"name":"x"}`, `{"name":""}`, `{"name":null}`,
	`{"name":"Acme","maxOrganizations":-1}`, `{"name":"Acme","maxOrganizations":1e400}`,
	`{"name":"Acme","slug":"UPPER CASE"}`, `{"name":"Acme","partnerId":"not-a-uuid"}`,
	`{"name":"Acme","partnerId":"00000000-0000-7000-8000-000000000000"}`,
	`{"name":"Acme","contractStart":"2026-13-45"}`, `{"name":"Acme","billingContact":"text"}`,
	`{"name":"Acme","settings":{"a":{"b":{"c":[1,2,{"d":null}]}}}}`, `{"name":"\u0000\ud800"}`,
	`{"orgId":"00000000-0000-7000-8000-000000000000","name":"s","timezone":"Not/AZone"}`,
	`{"email":"a@b.c","password":"x"}`, `{"refreshToken":"grt_x"}`, `{"tempToken":"a.b.c","code":"123456"}`,
	`{"token":"x","password":"Passw0rd-Ok"}`, `{"email":"x","name":"y","roleId":"z"}`,
	`{"name":"r","scope":"partner","permissions":["*:*"]}`, `{"name":"k","permissions":["nope"]}`,
	`{"format":"xml"}`, `{"name":"Acme"`, `{"name":"Acme"}}`, `{"a":` + strings.Repeat("[", 200),
}

func FuzzCreateRoutes(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(uint8(i), []byte(s))
	}
	e := apptest.New(f)
	admin := e.Admin()
	client := e.Server.Client()
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		path := createRoutes[int(route)%len(createRoutes)]
		req, err := http.NewRequest("POST", e.Server.URL+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+admin.Token)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode >= 500 {
			t.Fatalf("POST %s %q = %d %s", path, body, res.StatusCode, raw)
		}
		if res.StatusCode >= 400 {
			var env struct {
				Error struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(raw, &env); err != nil || env.Error.Code == "" || env.Error.Message == "" {
				t.Fatalf("POST %s %q = %d without the error envelope: %s", path, body, res.StatusCode, raw)
			}
		}
	})
}
