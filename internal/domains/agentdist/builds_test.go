package agentdist_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"gale/internal/app"
	"gale/internal/domains/agentdist"
	"gale/internal/testkit/apptest"
)

// writeBuilds lays out root/<version>/<name> files as the server's package ships them.
func writeBuilds(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for path, content := range files {
		full := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// shipped lists the registered versions with their platforms, and the promoted one.
func shipped(t *testing.T, svc *agentdist.Service) (map[string][]string, string) {
	t.Helper()
	list, err := svc.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out, promoted := map[string][]string{}, ""
	for _, v := range list {
		out[v.Version] = []string{}
		for _, p := range v.Platforms {
			out[v.Version] = append(out[v.Version], p.OS+"/"+p.Arch)
		}
		if v.Promoted {
			promoted = v.Version
		}
	}
	return out, promoted
}

func TestRegisterBuildsRegistersEveryVersionAndPromotesTheNewest(t *testing.T) {
	e := apptest.New(t)
	svc := app.Service[*agentdist.Service](e.App)
	ctx := context.Background()
	root := t.TempDir()
	writeBuilds(t, root, map[string]string{
		"1.0.0/gale-agent-linux-amd64":       "linux 1.0.0",
		"1.0.0/gale-agent-windows-arm64.exe": "windows 1.0.0",
		"1.0.0/gale-agent-plan9-amd64":       "unsupported",
		"1.0.0/README":                       "not a build",
		"v1.1.0/gale-agent-linux-amd64":      "linux 1.1.0",
		"0.9.0/gale-agent-darwin-arm64":      "darwin 0.9.0",
		"latest/gale-agent-linux-amd64":      "not under a version",
		"1.5.0/notes.txt":                    "no build at all",
		"gale-agent-linux-arm64":             "not under a version either",
	})
	if err := svc.RegisterBuilds(ctx, root); err != nil {
		t.Fatal(err)
	}
	versions, promoted := shipped(t, svc)
	want := map[string]int{"1.0.0": 2, "1.1.0": 1, "0.9.0": 1}
	if len(versions) != len(want) || promoted != "1.1.0" {
		t.Fatalf("versions %v, promoted %q; want %v with 1.1.0 promoted", versions, promoted, want)
	}
	for v, n := range want {
		if len(versions[v]) != n {
			t.Fatalf("version %s has %v, want %d builds", v, versions[v], n)
		}
	}
	b, r, err := svc.Open(ctx, "", "linux", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if b.Version != "1.1.0" || b.SizeBytes != int64(len("linux 1.1.0")) {
		t.Fatalf("download serves %+v", b)
	}

	// A restart registers nothing twice and changes nothing.
	if err := svc.RegisterBuilds(ctx, root); err != nil {
		t.Fatal(err)
	}
	var releases, audits int
	if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM agent_releases`).Scan(&releases); err != nil || releases != 4 {
		t.Fatalf("%d releases (%v), want 4", releases, err)
	}
	if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM audit_logs WHERE action LIKE 'agent_release.%'`).Scan(&audits); err != nil || audits != 5 {
		t.Fatalf("%d audit entries (%v), want 4 registrations and 1 promotion", audits, err)
	}

	if err := svc.RegisterBuilds(ctx, filepath.Join(root, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing directory = %v, want not-exist", err)
	}
}

func TestRegisterBuildsLeavesAnOperatorsPromotionAlone(t *testing.T) {
	e := apptest.New(t)
	svc := app.Service[*agentdist.Service](e.App)
	ctx := context.Background()
	root := t.TempDir()
	writeBuilds(t, root, map[string]string{"1.0.0/gale-agent-linux-amd64": "a", "1.1.0/gale-agent-linux-amd64": "b"})
	if err := svc.RegisterBuilds(ctx, root); err != nil {
		t.Fatal(err)
	}
	// The operator rolls back: a restart keeps the rollback.
	promote(t, e, "1.0.0")
	if err := svc.RegisterBuilds(ctx, root); err != nil {
		t.Fatal(err)
	}
	if _, promoted := shipped(t, svc); promoted != "1.0.0" {
		t.Fatalf("promoted %q after a restart, want the operator's 1.0.0", promoted)
	}
	// A newer package promotes its own version, never promoted before.
	writeBuilds(t, root, map[string]string{"1.2.0/gale-agent-linux-amd64": "c"})
	if err := svc.RegisterBuilds(ctx, root); err != nil {
		t.Fatal(err)
	}
	if _, promoted := shipped(t, svc); promoted != "1.2.0" {
		t.Fatalf("promoted %q, want the newly shipped 1.2.0", promoted)
	}
	// A newer version the operator promoted stays promoted.
	register(t, e, "2.0.0", "linux", "amd64", []byte("d"))
	promote(t, e, "2.0.0")
	writeBuilds(t, root, map[string]string{"1.3.0/gale-agent-linux-amd64": "e"})
	if err := svc.RegisterBuilds(ctx, root); err != nil {
		t.Fatal(err)
	}
	versions, promoted := shipped(t, svc)
	if promoted != "2.0.0" || len(versions["1.3.0"]) != 1 {
		t.Fatalf("versions %v, promoted %q; want 1.3.0 registered and 2.0.0 still promoted", versions, promoted)
	}
}

func TestRegisterBuildsSkipsAVersionWithOtherBytes(t *testing.T) {
	e := apptest.New(t)
	svc := app.Service[*agentdist.Service](e.App)
	ctx := context.Background()
	register(t, e, "1.1.0", "linux", "amd64", []byte("the bytes endpoints run"))
	root := t.TempDir()
	writeBuilds(t, root, map[string]string{"1.0.0/gale-agent-linux-amd64": "1.0.0", "1.1.0/gale-agent-linux-amd64": "rebuilt"})
	if err := svc.RegisterBuilds(ctx, root); err != nil {
		t.Fatal(err)
	}
	if _, promoted := shipped(t, svc); promoted != "1.0.0" {
		t.Fatalf("promoted %q, want 1.0.0: the clashing 1.1.0 is left out", promoted)
	}
	b, r, err := svc.Open(ctx, "1.1.0", "linux", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if b.SizeBytes != int64(len("the bytes endpoints run")) {
		t.Fatalf("1.1.0 changed: %+v", b)
	}
}

// Nodes that start at once register the same shipped builds at once: every one of them
// succeeds, and the database keeps one copy and one promoted version.
func TestRegisterBuildsOnSeveralNodesAtOnce(t *testing.T) {
	e := apptest.New(t)
	nodes := []*apptest.Env{e, e.SecondNode(), e.SecondNode(), e.SecondNode()}
	root := t.TempDir()
	builds := map[string]string{}
	for _, v := range []string{"1.0.0", "1.1.0"} {
		for _, name := range []string{"gale-agent-linux-amd64", "gale-agent-linux-arm64", "gale-agent-darwin-arm64", "gale-agent-windows-amd64.exe"} {
			builds[v+"/"+name] = v + " " + name
		}
	}
	writeBuilds(t, root, builds)
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = app.Service[*agentdist.Service](n.App).RegisterBuilds(context.Background(), root)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	versions, promoted := shipped(t, app.Service[*agentdist.Service](e.App))
	if promoted != "1.1.0" || len(versions["1.0.0"]) != 4 || len(versions["1.1.0"]) != 4 {
		t.Fatalf("versions %v, promoted %q", versions, promoted)
	}
}

// Registering the same bytes from several places at once is the same release, not a
// conflict, whichever transaction commits first.
func TestRegisterSameBytesConcurrently(t *testing.T) {
	e := apptest.New(t)
	svc := app.Service[*agentdist.Service](e.App)
	for round := range 5 {
		version := "3.0." + string(rune('0'+round))
		var wg sync.WaitGroup
		created := make([]bool, 6)
		errs := make([]error, len(created))
		for i := range created {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, created[i], errs[i] = svc.Register(context.Background(), version, "linux", "amd64", bytes.NewReader([]byte("same")), "")
			}()
		}
		wg.Wait()
		n := 0
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: register %d: %v", round, i, err)
			}
			if created[i] {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("round %d: %d registrations created the release, want 1", round, n)
		}
	}
}
