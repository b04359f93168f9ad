package thirdparty_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/thirdparty"
	"gale/internal/platform/clock"
	"gale/internal/testkit/apptest"
)

const api = "/api/v1/third-party-catalog"

// installers serves files by path.
func installers(t *testing.T, files map[string][]byte) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

var deb = []byte("!<arch>\ndebian-binary   1700000000  0     0     100644  4         `\n2.0\n")

func version(v, url, sha string) map[string]any {
	return map[string]any{"version": v, "downloadUrl": url, "sha256": sha, "fileType": "deb", "osType": "linux",
		"cveIds": []string{"CVE-2026-12345"}}
}

func entry(vendor, name string, versions ...map[string]any) map[string]any {
	return map[string]any{"vendor": vendor, "name": name, "osTypes": []string{"linux"}, "packageNames": []string{"zeta-browser"},
		"defaultSeverity": "important", "versions": versions}
}

func TestCatalogIsThePlatformsAndValidated(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Alpha")
	var p thirdparty.Package
	e.Must(201, admin, "POST", api, entry("Zeta", "Browser", version("2.0", "https://dl.example/z-2.0.deb", sum(deb)),
		version("1.0", "https://dl.example/z-1.0.deb", strings.Repeat("AB", 32)))).JSON(t, &p)
	if p.LatestVersion == nil || *p.LatestVersion != "2.0" || p.PlatformTested || len(p.Versions) != 2 || p.Versions[1].SHA256 != strings.Repeat("ab", 32) ||
		p.DefaultSeverity != "important" || p.LastTest != nil {
		t.Fatalf("created %+v", p)
	}

	// Nobody below the platform sees or changes it.
	for _, c := range []apptest.Caller{ten.Partner, ten.Org} {
		for _, rt := range []struct{ method, path string }{{"GET", api}, {"POST", api}, {"GET", api + "/" + p.ID},
			{"PATCH", api + "/" + p.ID}, {"DELETE", api + "/" + p.ID}, {"POST", api + "/" + p.ID + "/test"}} {
			var body any
			switch {
			case rt.method == "POST" && rt.path == api:
				body = entry("Other", "App")
			case rt.method == "POST":
				body = map[string]any{"version": "2.0"}
			case rt.method == "PATCH":
				body = map[string]any{"name": "Mine"}
			}
			if r := e.Do(c, rt.method, rt.path, body); r.Status != 403 {
				t.Errorf("%s %s by a tenant = %d %s, want 403", rt.method, rt.path, r.Status, r.Body)
			}
		}
	}

	if r := e.Do(admin, "POST", api, entry("zeta", "BROWSER")); r.Status != 409 || r.ErrorCode() != "THIRD_PARTY_PACKAGE_EXISTS" {
		t.Fatalf("same vendor and name = %d %s", r.Status, r.Body)
	}
	msi := version("3.0", "https://dl.example/z.msi", sum(deb))
	msi["fileType"] = "msi"
	for name, tc := range map[string]struct {
		body  map[string]any
		field string
	}{
		"no package names": {map[string]any{"vendor": "V", "name": "N", "osTypes": []string{"linux"}}, "packageNames"},
		"bad system":       {map[string]any{"vendor": "V", "name": "N", "osTypes": []string{"beos"}, "packageNames": []string{"n"}}, "osTypes"},
		"bad checksum":     {entry("V", "N", version("1", "https://dl.example/x.deb", "abc")), "versions[0].sha256"},
		"ftp address":      {entry("V", "N", version("1", "ftp://dl.example/x.deb", sum(deb))), "versions[0].downloadUrl"},
		"msi on linux":     {entry("V", "N", msi), "versions[0].osType"},
		"bad cve":          {entry("V", "N", map[string]any{"version": "1", "downloadUrl": "https://a.example/x", "sha256": sum(deb), "fileType": "deb", "osType": "linux", "cveIds": []string{"CVE-12"}}), "versions[0].cveIds"},
		"twice":            {entry("V", "N", version("1", "https://a.example/x", sum(deb)), version("1", "https://a.example/y", sum(deb))), "versions[1].version"},
	} {
		if r := e.Do(admin, "POST", api, tc.body); r.Status != 400 || !strings.Contains(string(r.Body), `"field":"`+tc.field+`"`) {
			t.Errorf("%s: %d %s, want 400 on %s", name, r.Status, r.Body, tc.field)
		}
	}

	e.Must(201, admin, "POST", api, entry("Acme", "Archiver"))
	var list struct{ Data []thirdparty.Package }
	e.Must(200, admin, "GET", api+"?vendor=ZETA", nil).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != p.ID || len(list.Data[0].Versions) != 2 {
		t.Fatalf("by vendor: %+v", list.Data)
	}
	e.Must(200, admin, "GET", api+"?search=chiv", nil).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].Name != "Archiver" || list.Data[0].LatestVersion != nil {
		t.Fatalf("by search: %+v", list.Data)
	}

	var got thirdparty.Package
	e.Must(200, admin, "PATCH", api+"/"+p.ID, map[string]any{"description": "A browser.\nFast."}).JSON(t, &got)
	if got.Description != "A browser.\nFast." || len(got.Versions) != 2 || got.Name != "Browser" {
		t.Fatalf("patched %+v", got)
	}
	if r := e.Do(admin, "PATCH", api+"/"+p.ID, map[string]any{"vendor": "Acme", "name": "archiver"}); r.Status != 409 {
		t.Fatalf("rename onto another entry = %d %s", r.Status, r.Body)
	}
	e.Must(204, admin, "DELETE", api+"/"+p.ID, nil)
	e.Must(404, admin, "GET", api+"/"+p.ID, nil)
	e.Must(404, admin, "POST", api+"/"+p.ID+"/test", map[string]any{"version": "2.0"})
}

func TestSmokeTestsCheckTheInstaller(t *testing.T) {
	clk := clock.NewFake(time.Now())
	e := apptest.New(t, apptest.WithClock(clk))
	admin := e.Admin()
	srv := installers(t, map[string][]byte{"/good.deb": deb, "/text.deb": []byte("hello"), "/big.deb": append(append([]byte{}, deb...), make([]byte, 4096)...)})
	var p thirdparty.Package
	e.Must(201, admin, "POST", api, entry("Zeta", "Browser",
		version("5.0", srv.URL+"/good.deb", sum(deb)),
		version("4.0", srv.URL+"/good.deb", sum([]byte("other"))),
		version("3.0", srv.URL+"/text.deb", sum([]byte("hello"))),
		version("2.0", srv.URL+"/missing.deb", sum(deb)))).JSON(t, &p)
	svc := app.Service[*thirdparty.Service](e.App)
	ctx := context.Background()

	if r := e.Do(admin, "POST", api+"/"+p.ID+"/test", map[string]any{"version": "9.9"}); r.Status != 400 {
		t.Fatalf("unknown version = %d %s", r.Status, r.Body)
	}
	for _, tc := range []struct{ version, status, message string }{
		{"4.0", thirdparty.TestFailed, "checksum mismatch"},
		{"3.0", thirdparty.TestFailed, "is not a deb installer"},
		{"2.0", thirdparty.TestFailed, "404 Not Found"},
		{"5.0", thirdparty.TestPassed, "checksum and deb file type are right"},
	} {
		var queued thirdparty.SmokeTest
		e.Must(202, admin, "POST", api+"/"+p.ID+"/test", map[string]any{"version": tc.version}).JSON(t, &queued)
		if queued.Status != thirdparty.TestQueued || queued.Version != tc.version {
			t.Fatalf("queued %+v", queued)
		}
		if r := e.Do(admin, "POST", api+"/"+p.ID+"/test", map[string]any{"version": "5.0"}); r.Status != 409 || r.ErrorCode() != thirdparty.CodeTestInProgress {
			t.Fatalf("a second test while one is queued = %d %s", r.Status, r.Body)
		}
		if err := svc.RunQueued(ctx); err != nil {
			t.Fatal(err)
		}
		var got thirdparty.Package
		e.Must(200, admin, "GET", api+"/"+p.ID, nil).JSON(t, &got)
		if got.LastTest == nil || got.LastTest.ID != queued.ID || got.LastTest.Status != tc.status || !strings.Contains(got.LastTest.Message, tc.message) ||
			got.LastTest.FinishedAt == nil {
			t.Fatalf("test of %s: %+v", tc.version, got.LastTest)
		}
	}
	var got thirdparty.Package
	e.Must(200, admin, "GET", api+"/"+p.ID, nil).JSON(t, &got)
	if !got.PlatformTested || !got.Versions[0].PlatformTested || got.Versions[0].TestedAt == nil || got.Versions[1].PlatformTested {
		t.Fatalf("after a passing test of the latest version: %+v", got)
	}
	var list struct{ Data []thirdparty.Package }
	e.Must(200, admin, "GET", api+"?platformTested=true", nil).JSON(t, &list)
	if len(list.Data) != 1 {
		t.Fatalf("tested entries: %+v", list.Data)
	}
	e.Must(200, admin, "GET", api+"?platformTested=false", nil).JSON(t, &list)
	if len(list.Data) != 0 {
		t.Fatalf("untested entries: %+v", list.Data)
	}

	// Replacing the versions keeps the mark of an unchanged installer and drops a changed one's.
	vs := []map[string]any{version("5.0", srv.URL+"/good.deb", sum(deb)), version("4.0", srv.URL+"/big.deb", sum(deb))}
	e.Must(200, admin, "PATCH", api+"/"+p.ID, map[string]any{"versions": vs}).JSON(t, &got)
	if !got.Versions[0].PlatformTested || got.Versions[1].PlatformTested {
		t.Fatalf("after replacing the versions: %+v", got.Versions)
	}
	vs[0]["downloadUrl"] = srv.URL + "/good.deb?mirror=2"
	e.Must(200, admin, "PATCH", api+"/"+p.ID, map[string]any{"versions": vs}).JSON(t, &got)
	if got.PlatformTested {
		t.Fatalf("a new installer address kept the mark: %+v", got.Versions[0])
	}

	// A size cap: the download stops there.
	small := thirdparty.New(thirdparty.Deps{DB: e.App.DB, Clock: clk}, thirdparty.Options{MaxBytes: 1024})
	e.Must(202, admin, "POST", api+"/"+p.ID+"/test", map[string]any{"version": "4.0"})
	if err := small.RunQueued(ctx); err != nil {
		t.Fatal(err)
	}
	e.Must(200, admin, "GET", api+"/"+p.ID, nil).JSON(t, &got)
	if got.LastTest.Status != thirdparty.TestFailed || !strings.Contains(got.LastTest.Message, "larger than the 1024 bytes") {
		t.Fatalf("over the cap: %+v", got.LastTest)
	}

	// A test left running by a node that stopped fails after 30 minutes, and frees the entry.
	e.Must(202, admin, "POST", api+"/"+p.ID+"/test", map[string]any{"version": "5.0"})
	stuck := thirdparty.New(thirdparty.Deps{DB: e.App.DB, Clock: clk}, thirdparty.Options{})
	if _, err := e.App.DB.ExecContext(ctx, `UPDATE third_party_tests SET status = 'running', started_at = $1 WHERE status = 'queued'`,
		clk.Now()); err != nil {
		t.Fatal(err)
	}
	clk.Advance(31 * time.Minute)
	if err := stuck.RunQueued(ctx); err != nil {
		t.Fatal(err)
	}
	e.Must(200, admin, "GET", api+"/"+p.ID, nil).JSON(t, &got)
	if got.LastTest.Status != thirdparty.TestFailed || !strings.Contains(got.LastTest.Message, "interrupted") {
		t.Fatalf("an interrupted test: %+v", got.LastTest)
	}
}

// Concurrent requests to test one entry queue exactly one test; the database decides.
func TestConcurrentTestsQueueOne(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	var p thirdparty.Package
	e.Must(201, admin, "POST", api, entry("Zeta", "Browser", version("1.0", "https://dl.example/z.deb", sum(deb)))).JSON(t, &p)
	var wg sync.WaitGroup
	statuses := make(chan int, 20)
	for range 20 {
		wg.Go(func() { statuses <- e.Do(admin, "POST", api+"/"+p.ID+"/test", map[string]any{"version": "1.0"}).Status })
	}
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	if counts[202] != 1 || counts[409] != 19 {
		t.Fatalf("statuses = %v, want one 202 and 19 409", counts)
	}
}
