package agentdist_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"testing"

	"gale/internal/app"

	"gale/internal/domains/agentdist"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

const api = "/api/v1"

func register(t *testing.T, e *apptest.Env, version, goos, arch string, data []byte) agentdist.Binary {
	t.Helper()
	b, _, err := app.Service[*agentdist.Service](e.App).Register(context.Background(), version, goos, arch, bytes.NewReader(data), "")
	if err != nil {
		t.Fatalf("register %s %s/%s: %v", version, goos, arch, err)
	}
	return b
}

func promote(t *testing.T, e *apptest.Env, version string) string {
	t.Helper()
	prev, err := app.Service[*agentdist.Service](e.App).Promote(context.Background(), version)
	if err != nil {
		t.Fatalf("promote %s: %v", version, err)
	}
	return prev
}

func wantAppErr(t *testing.T, err error, status int, code string) {
	t.Helper()
	ae, ok := apperr.As(err)
	if !ok || httpapi.StatusOf(ae) != status || ae.Code != code {
		t.Fatalf("error = %v, want %d %s", err, status, code)
	}
}

func wantStatus(t *testing.T, r *apptest.Response, status int, code string) {
	t.Helper()
	if r.Status != status || r.ErrorCode() != code {
		t.Fatalf("status %d %s, want %d %s", r.Status, r.Body, status, code)
	}
}

func TestVersionsNormalizeAndOrderBySemver(t *testing.T) {
	for in, want := range map[string]string{"1.2.3": "1.2.3", "v1.2.3": "1.2.3", "1.2.3-rc.1": "1.2.3-rc.1", "v0.0.0-dev.abc-dirty": "0.0.0-dev.abc-dirty", "1.2.3+build.5": "1.2.3+build.5"} {
		if got, err := agentdist.NormalizeVersion(in); err != nil || got != want {
			t.Errorf("NormalizeVersion(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "1.2", "1.2.3.4", "V1.2.3", "1.2.3-", "1.2.3 ", "01.2.3/x", "1.2.3-a+b", strings.Repeat("1", 70) + ".0.0"} {
		if _, err := agentdist.NormalizeVersion(bad); !apperr.IsCode(err, apperr.CodeValidation) {
			t.Errorf("NormalizeVersion(%q) = %v, want VALIDATION_ERROR", bad, err)
		}
	}
	ordered := []string{"0.9.9", "1.2.3-alpha", "1.2.3-alpha.1", "1.2.3-alpha.beta", "1.2.3-beta.2", "1.2.3-beta.10",
		"1.2.3-rc.1", "1.2.3", "1.9.0", "1.10.0", "2.0.0"}
	for i := 0; i+1 < len(ordered); i++ {
		if agentdist.CompareVersions(ordered[i], ordered[i+1]) >= 0 || agentdist.CompareVersions(ordered[i+1], ordered[i]) <= 0 {
			t.Errorf("%s should sort before %s", ordered[i], ordered[i+1])
		}
	}
}

func TestRegisterPromoteAndLatest(t *testing.T) {
	e := apptest.New(t)
	ctx := context.Background()
	svc := app.Service[*agentdist.Service](e.App)
	if _, err := svc.Latest(ctx); !apperr.IsCode(err, apperr.CodeNotFound) {
		t.Fatalf("latest of nothing = %v, want NOT_FOUND", err)
	}
	register(t, e, "1.9.0", "linux", "amd64", []byte("nine"))
	register(t, e, "v1.10.0", "linux", "amd64", []byte("ten"))
	register(t, e, "1.10.0", "windows", "arm64", []byte("ten-win"))

	// Nothing promoted: latest is the highest by semver, not by text ("1.9.0" > "1.10.0").
	latest, err := svc.Latest(ctx)
	if err != nil || latest.Version != "1.10.0" || latest.Promoted {
		t.Fatalf("latest = %+v, %v; want 1.10.0 unpromoted", latest, err)
	}
	list, err := svc.List(ctx)
	if err != nil || len(list) != 2 || list[0].Version != "1.10.0" || list[1].Version != "1.9.0" {
		t.Fatalf("list = %+v, %v", list, err)
	}
	if p := list[0].Platforms; len(p) != 2 || p[0].OS != "linux" || p[1].OS != "windows" || p[1].SizeBytes != 7 {
		t.Fatalf("platforms of 1.10.0 = %+v", p)
	}

	if prev := promote(t, e, "1.9.0"); prev != "" {
		t.Fatalf("previous of the first promotion = %q", prev)
	}
	latest, _ = svc.Latest(ctx)
	if latest.Version != "1.9.0" || !latest.Promoted || latest.ReleasedAt == nil {
		t.Fatalf("latest after promoting 1.9.0 = %+v", latest)
	}
	firstRelease := *latest.ReleasedAt
	if prev := promote(t, e, "v1.10.0"); prev != "1.9.0" {
		t.Fatalf("previous = %q, want 1.9.0", prev)
	}
	if prev := promote(t, e, "1.9.0"); prev != "1.10.0" {
		t.Fatalf("previous = %q, want 1.10.0", prev)
	}
	list, _ = svc.List(ctx)
	if list[0].Promoted || !list[1].Promoted || !list[1].ReleasedAt.Equal(firstRelease) {
		t.Fatalf("after promoting 1.9.0 again: %+v (releasedAt keeps the first promotion)", list)
	}

	_, err = svc.Promote(ctx, "2.0.0")
	wantAppErr(t, err, http.StatusNotFound, apperr.CodeNotFound)
	_, err = svc.Promote(ctx, "nope")
	wantAppErr(t, err, http.StatusBadRequest, apperr.CodeValidation)

	var audits int
	if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM audit_logs WHERE action IN ('agent_release.register', 'agent_release.promote')
		AND actor_type = 'system'`).Scan(&audits); err != nil || audits != 6 {
		t.Fatalf("audit entries = %d, %v; want 3 registrations and 3 promotions", audits, err)
	}
}

func TestRegisterRefusesOtherBytesAndBadInput(t *testing.T) {
	e := apptest.New(t)
	ctx := context.Background()
	svc := app.Service[*agentdist.Service](e.App)
	first := register(t, e, "1.0.0", "linux", "amd64", []byte("one"))
	sum := sha256.Sum256([]byte("one"))
	if first.SHA256 != hex.EncodeToString(sum[:]) || first.SizeBytes != 3 || first.Version != "1.0.0" {
		t.Fatalf("binary = %+v", first)
	}
	// The same bytes again change nothing; other bytes are refused.
	if _, created, err := svc.Register(ctx, "v1.0.0", "linux", "amd64", strings.NewReader("one"), ""); err != nil || created {
		t.Fatalf("re-register same bytes: created=%v err=%v", created, err)
	}
	_, _, err := svc.Register(ctx, "1.0.0", "linux", "amd64", strings.NewReader("other"), "")
	wantAppErr(t, err, http.StatusConflict, apperr.CodeConflict)

	for name, c := range map[string]struct{ version, os, arch, data string }{
		"bad version": {"1.0", "linux", "amd64", "x"},
		"bad os":      {"1.0.0", "freebsd", "amd64", "x"},
		"bad arch":    {"1.0.0", "linux", "386", "x"},
		"empty":       {"1.0.0", "darwin", "amd64", ""},
	} {
		if _, _, err := svc.Register(ctx, c.version, c.os, c.arch, strings.NewReader(c.data), ""); !apperr.IsCode(err, apperr.CodeValidation) {
			t.Errorf("%s: %v, want VALIDATION_ERROR", name, err)
		}
	}
	list, _ := svc.List(ctx)
	if len(list) != 1 || len(list[0].Platforms) != 1 {
		t.Fatalf("refused registrations left rows: %+v", list)
	}
}

func TestOnePromotedVersionEvenUnderConcurrentPromotions(t *testing.T) {
	e := apptest.New(t)
	versions := []string{"1.0.0", "2.0.0", "3.0.0", "4.0.0"}
	for _, v := range versions {
		register(t, e, v, "linux", "amd64", []byte(v))
	}
	for round := 0; round < 5; round++ {
		var wg sync.WaitGroup
		errs := make([]error, len(versions))
		for i, v := range versions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = app.Service[*agentdist.Service](e.App).Promote(context.Background(), v)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: promote %s: %v", round, versions[i], err)
			}
		}
		var promoted int
		if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM agent_versions WHERE promoted`).Scan(&promoted); err != nil || promoted != 1 {
			t.Fatalf("round %d: %d promoted versions (%v), want 1", round, promoted, err)
		}
	}
	// The rule is the database's own, not only the service's.
	_, err := e.App.DB.SQL.Exec(`UPDATE agent_versions SET promoted = TRUE`)
	if !store.IsUniqueViolation(err) {
		t.Fatalf("promoting every version directly = %v, want a unique violation", err)
	}
}

func TestDownloadServesThePromotedBinaryWithoutCredential(t *testing.T) {
	e := apptest.New(t)
	r := e.Do(apptest.Anonymous, "GET", api+"/agents/download/linux/amd64", nil)
	wantStatus(t, r, http.StatusNotFound, apperr.CodeNotFound)
	if !strings.Contains(string(r.Body), "no agent release is promoted for linux/amd64; register one with gale agent-release") {
		t.Fatalf("message = %s", r.Body)
	}

	// Larger than one read chunk, so the download crosses chunk boundaries.
	big := make([]byte, 2<<20+12345)
	_, _ = rand.Read(big)
	register(t, e, "1.0.0", "linux", "amd64", []byte("old build"))
	register(t, e, "1.1.0", "linux", "amd64", big)
	register(t, e, "1.1.0", "windows", "amd64", []byte("MZ windows"))
	promote(t, e, "1.1.0")

	r = e.Must(http.StatusOK, apptest.Anonymous, "GET", api+"/agents/download/linux/amd64", nil)
	sum := sha256.Sum256(r.Body)
	if !bytes.Equal(r.Body, big) || r.Header.Get("X-Checksum-Sha256") != hex.EncodeToString(sum[:]) {
		t.Fatalf("body of %d bytes, checksum header %q", len(r.Body), r.Header.Get("X-Checksum-Sha256"))
	}
	for k, want := range map[string]string{"Content-Type": "application/octet-stream", "Content-Length": "2109497",
		"Content-Disposition": "attachment; filename=gale-agent", "X-Agent-Version": "1.1.0"} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	r = e.Must(http.StatusOK, apptest.Anonymous, "GET", api+"/agents/download/windows/amd64", nil)
	if string(r.Body) != "MZ windows" || r.Header.Get("Content-Disposition") != "attachment; filename=gale-agent.exe" {
		t.Fatalf("windows download: %q %q", r.Body, r.Header.Get("Content-Disposition"))
	}

	// ?version= pins a registered release; unregistered versions and platforms are 404.
	r = e.Must(http.StatusOK, apptest.Anonymous, "GET", api+"/agents/download/linux/amd64?version=v1.0.0", nil)
	if string(r.Body) != "old build" || r.Header.Get("X-Agent-Version") != "1.0.0" {
		t.Fatalf("pinned download: %q version %q", r.Body, r.Header.Get("X-Agent-Version"))
	}
	wantStatus(t, e.Do(apptest.Anonymous, "GET", api+"/agents/download/linux/amd64?version=9.9.9", nil), http.StatusNotFound, apperr.CodeNotFound)
	wantStatus(t, e.Do(apptest.Anonymous, "GET", api+"/agents/download/darwin/arm64", nil), http.StatusNotFound, apperr.CodeNotFound)
	wantStatus(t, e.Do(apptest.Anonymous, "GET", api+"/agents/download/windows/amd64?version=1.0.0", nil), http.StatusNotFound, apperr.CodeNotFound)

	for _, path := range []string{"/agents/download/freebsd/amd64", "/agents/download/linux/386", "/agents/download/Linux/amd64",
		"/agents/download/linux/amd64?version=latest"} {
		r := e.Do(apptest.Anonymous, "GET", api+path, nil)
		wantStatus(t, r, http.StatusBadRequest, apperr.CodeValidation)
		if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			t.Errorf("%s: error Content-Type %q", path, r.Header.Get("Content-Type"))
		}
	}
	// A client that asks for the binary type still gets a readable error envelope.
	r = e.Do(apptest.Caller{Header: http.Header{"Accept": {"application/octet-stream"}}}, "GET", api+"/agents/download/darwin/arm64", nil)
	wantStatus(t, r, http.StatusNotFound, apperr.CodeNotFound)
}

func TestAgentVersionRoutesNeedDevicesRead(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Alpha")
	wantStatus(t, e.Do(admin, "GET", api+"/agent-versions/latest", nil), http.StatusNotFound, apperr.CodeNotFound)
	register(t, e, "1.9.0", "linux", "amd64", []byte("nine"))
	register(t, e, "1.10.0", "linux", "arm64", []byte("ten"))
	promote(t, e, "1.9.0")

	for _, path := range []string{"/agent-versions", "/agent-versions/latest", "/agent-versions/1.9.0/download?os=linux&arch=amd64"} {
		wantStatus(t, e.Do(apptest.Anonymous, "GET", api+path, nil), http.StatusUnauthorized, apperr.CodeUnauthorized)
	}
	var role struct {
		ID string `json:"id"`
	}
	e.Must(http.StatusCreated, ten.Org, "POST", api+"/roles", map[string]any{"name": "Sites only", "scope": "organization",
		"permissions": []string{"sites:read"}}).JSON(t, &role)
	_, noDevices := e.CreateUser("sites@gale.test", access.LevelOrganization, ten.PartnerID, ten.OrgID, role.ID)
	wantStatus(t, e.Do(noDevices, "GET", api+"/agent-versions", nil), http.StatusForbidden, apperr.CodeForbidden)

	_, viewer := e.CreateUser("viewer@gale.test", access.LevelOrganization, ten.PartnerID, ten.OrgID, access.RoleOrgViewer)
	var list struct {
		Data []struct {
			Version    string  `json:"version"`
			Promoted   bool    `json:"promoted"`
			ReleasedAt *string `json:"releasedAt"`
			Platforms  []struct {
				OS        string `json:"os"`
				Arch      string `json:"arch"`
				SHA256    string `json:"sha256"`
				SizeBytes int64  `json:"sizeBytes"`
			} `json:"platforms"`
		} `json:"data"`
		Pagination struct {
			HasMore bool `json:"hasMore"`
		} `json:"pagination"`
	}
	e.Must(http.StatusOK, viewer, "GET", api+"/agent-versions", nil).JSON(t, &list)
	if len(list.Data) != 2 || list.Data[0].Version != "1.10.0" || list.Data[0].Promoted || list.Data[0].ReleasedAt != nil ||
		!list.Data[1].Promoted || list.Data[1].ReleasedAt == nil || list.Pagination.HasMore {
		t.Fatalf("list = %+v", list)
	}
	if p := list.Data[1].Platforms; len(p) != 1 || p[0].OS != "linux" || p[0].Arch != "amd64" || p[0].SizeBytes != 4 || len(p[0].SHA256) != 64 {
		t.Fatalf("platforms = %+v", p)
	}
	var latest struct {
		Version string `json:"version"`
	}
	e.Must(http.StatusOK, viewer, "GET", api+"/agent-versions/latest", nil).JSON(t, &latest)
	if latest.Version != "1.9.0" {
		t.Fatalf("latest = %q, want the promoted 1.9.0 over the higher 1.10.0", latest.Version)
	}

	r := e.Must(http.StatusOK, viewer, "GET", api+"/agent-versions/1.10.0/download?os=linux&arch=arm64", nil)
	if string(r.Body) != "ten" || r.Header.Get("X-Agent-Version") != "1.10.0" || r.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("download: %q %v", r.Body, r.Header)
	}
	wantStatus(t, e.Do(viewer, "GET", api+"/agent-versions/2.0.0/download?os=linux&arch=amd64", nil), http.StatusNotFound, apperr.CodeNotFound)
	wantStatus(t, e.Do(viewer, "GET", api+"/agent-versions/1.10.0/download?os=linux&arch=amd64", nil), http.StatusNotFound, apperr.CodeNotFound)
	wantStatus(t, e.Do(viewer, "GET", api+"/agent-versions/1.10.0/download?os=linux", nil), http.StatusBadRequest, apperr.CodeValidation)
	wantStatus(t, e.Do(viewer, "GET", api+"/agent-versions/1.10.0/download?os=plan9&arch=amd64", nil), http.StatusBadRequest, apperr.CodeValidation)
}
