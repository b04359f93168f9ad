package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gale/internal/app"
	"gale/internal/domains/agentdist"
	"gale/internal/platform/config"
	"gale/internal/platform/store/storetest"
	"gale/internal/testkit/apptest"
)

// gale runs the command line against the test database and returns what it printed.
func gale(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := root()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestAgentReleaseCommands(t *testing.T) {
	t.Setenv("DATABASE_URL", storetest.URL(t))
	t.Setenv("DATA_DIR", t.TempDir())
	t.Setenv("LOG_LEVEL", "error")
	// Every command opens the app, which prepares a password hash: keep that cheap.
	t.Setenv("ARGON2_MEMORY_KIB", "8")
	t.Setenv("ARGON2_ITERATIONS", "1")
	t.Setenv("ARGON2_PARALLELISM", "1")
	dir := t.TempDir()
	for name, content := range map[string]string{"gale-agent-linux-amd64": "linux build", "gale-agent-windows-arm64.exe": "windows build",
		"gale-agent-plan9-amd64": "unsupported", "README": "not a binary"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	out, err := gale(t, "agent-release", "register-dir", "--version", "v1.2.3", dir)
	if err != nil {
		t.Fatalf("register-dir: %v\n%s", err, out)
	}
	for _, want := range []string{"registered gale-agent 1.2.3 linux/amd64 (11 bytes", "registered gale-agent 1.2.3 windows/arm64 (13 bytes",
		"skipped gale-agent-plan9-amd64"} {
		if !strings.Contains(out, want) {
			t.Errorf("register-dir output lacks %q:\n%s", want, out)
		}
	}
	if out, _ := gale(t, "agent-release", "register-dir", "--version", "1.2.3", dir); !strings.Contains(out, "already registered, unchanged: gale-agent 1.2.3 linux/amd64") {
		t.Errorf("second register-dir:\n%s", out)
	}
	if _, err := gale(t, "agent-release", "register-dir", "--version", "1.2.3", t.TempDir()); err == nil || !strings.Contains(err.Error(), "make agents") {
		t.Errorf("empty directory: %v", err)
	}

	other := filepath.Join(t.TempDir(), "gale-agent")
	if err := os.WriteFile(other, []byte("rebuilt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := gale(t, "agent-release", "register", "--version", "1.2.3", "--os", "linux", "--arch", "amd64", "--file", other); err == nil ||
		!strings.Contains(err.Error(), "already registered with other bytes") {
		t.Errorf("re-register with other bytes: %v", err)
	}
	if _, err := gale(t, "agent-release", "register", "--version", "1.2", "--os", "linux", "--arch", "amd64", "--file", other); err == nil ||
		!strings.Contains(err.Error(), "version: use a version like 1.2.3") {
		t.Errorf("bad version: %v", err)
	}
	out, err = gale(t, "agent-release", "register", "--version", "1.10.0", "--os", "darwin", "--arch", "arm64", "--file", other, "--notes", "Faster inventory")
	if err != nil || !strings.Contains(out, "registered gale-agent 1.10.0 darwin/arm64 (7 bytes") {
		t.Fatalf("register: %v\n%s", err, out)
	}

	if out, err := gale(t, "agent-release", "promote", "v1.2.3"); err != nil || !strings.Contains(out, "promoted gale-agent 1.2.3 (previously promoted: none)") {
		t.Fatalf("promote: %v\n%s", err, out)
	}
	if out, err := gale(t, "agent-release", "promote", "1.10.0"); err != nil || !strings.Contains(out, "(previously promoted: 1.2.3)") {
		t.Fatalf("promote: %v\n%s", err, out)
	}
	if _, err := gale(t, "agent-release", "promote", "9.9.9"); err == nil || !strings.Contains(err.Error(), "agent version 9.9.9 not found") {
		t.Fatalf("promote unregistered: %v", err)
	}

	out, err = gale(t, "agent-release", "list")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "VERSION") ||
		strings.Join(strings.Fields(lines[1]), " ") != "1.10.0 yes darwin/arm64 Faster inventory" ||
		strings.Join(strings.Fields(lines[2]), " ") != "1.2.3 linux/amd64 windows/arm64" {
		t.Fatalf("list:\n%s", out)
	}
}

func TestServeRegistersTheShippedAgentBuilds(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "1.4.0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "1.4.0", "gale-agent-linux-amd64"), []byte("shipped"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		buildsDir    string
		publicURLSet bool
		promoted     string
		warns        bool
	}{
		{"no builds directory", "", false, "", false},
		{"PUBLIC_URL unset", dir, false, "1.4.0", true},
		{"PUBLIC_URL set", dir, true, "1.4.0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := apptest.New(t, func(c *config.Config) { c.AgentBuildsDir = tc.buildsDir })
			var logs bytes.Buffer
			e.App.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			registerAgentBuilds(context.Background(), e.App, tc.publicURLSet)
			promoted := ""
			if v, err := app.Service[*agentdist.Service](e.App).Latest(context.Background()); err == nil && v.Promoted {
				promoted = v.Version
			}
			if promoted != tc.promoted {
				t.Errorf("promoted %q, want %q", promoted, tc.promoted)
			}
			if warned := strings.Contains(logs.String(), "PUBLIC_URL is not set: install.sh tells endpoints"); warned != tc.warns {
				t.Errorf("warned about PUBLIC_URL: %v, want %v; log:\n%s", warned, tc.warns, logs.String())
			}
		})
	}
}
