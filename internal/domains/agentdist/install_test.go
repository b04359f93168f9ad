package agentdist_test

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gale/internal/platform/config"
	"gale/internal/testkit/apptest"
)

// installScript fetches the script without a credential and writes it to a file.
func installScript(t *testing.T, e *apptest.Env) string {
	t.Helper()
	r := e.Must(http.StatusOK, apptest.Anonymous, "GET", api+"/agents/install.sh", nil)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/x-shellscript") {
		t.Fatalf("Content-Type = %q", ct)
	}
	path := filepath.Join(t.TempDir(), "install.sh")
	if err := os.WriteFile(path, r.Body, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// fakeAgent is a "gale-agent" that appends its arguments to log, one call per line.
func fakeAgent(log, marker string) []byte {
	return []byte("#!/bin/sh\n# " + marker + "\nprintf '%s\\n' \"$*\" >> '" + log + "'\n")
}

// registerFake registers the fake agent for every platform install.sh supports.
func registerFake(t *testing.T, e *apptest.Env, version string, data []byte) {
	t.Helper()
	for _, goos := range []string{"linux", "darwin"} {
		for _, arch := range []string{"amd64", "arm64"} {
			register(t, e, version, goos, arch, data)
		}
	}
}

func runInstall(t *testing.T, script string, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("sh", append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func TestInstallScriptIsPublicAndValidShell(t *testing.T) {
	e := apptest.New(t)
	path := installScript(t, e)
	body, _ := os.ReadFile(path)
	if !strings.Contains(string(body), "server='"+e.Server.URL+"'") ||
		!strings.Contains(string(body), "curl -fsSL "+e.Server.URL+"/api/v1/agents/install.sh | sudo sh -s --") {
		t.Fatalf("the script does not carry the server address %s:\n%s", e.Server.URL, body)
	}
	if out, err := exec.Command("sh", "-n", path).CombinedOutput(); err != nil {
		t.Fatalf("sh -n: %v\n%s", err, out)
	}
	if _, err := exec.LookPath("shellcheck"); err == nil {
		if out, err := exec.Command("shellcheck", "-s", "sh", path).CombinedOutput(); err != nil {
			t.Fatalf("shellcheck: %v\n%s", err, out)
		}
	}
	out, err := runInstall(t, path, nil, "--secret", "S", "--no-service")
	if err == nil || !strings.Contains(out, "--key is required") {
		t.Fatalf("without --key: %v\n%s", err, out)
	}
}

func TestInstallScriptInstallsAndEnrolls(t *testing.T) {
	e := apptest.New(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	registerFake(t, e, "1.0.0", fakeAgent(log, "1.0.0"))
	registerFake(t, e, "1.1.0", fakeAgent(log, "1.1.0"))
	promote(t, e, "1.1.0")
	script := installScript(t, e)
	prefix := filepath.Join(dir, "bin")

	out, err := runInstall(t, script, nil, "--key", "K", "--secret", "S", "--prefix", prefix, "--no-service")
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	bin := filepath.Join(prefix, "gale-agent")
	info, err := os.Stat(bin)
	if err != nil || info.Mode().Perm() != 0o755 {
		t.Fatalf("installed binary: %v, %v", info, err)
	}
	if got, _ := os.ReadFile(bin); !bytes.Contains(got, []byte("# 1.1.0")) {
		t.Fatalf("installed %q, want the promoted 1.1.0", got)
	}
	calls, _ := os.ReadFile(log)
	if want := "enroll K --server " + e.Server.URL + " --enrollment-secret S --quiet\n"; string(calls) != want {
		t.Fatalf("agent calls = %q, want %q", calls, want)
	}

	// A pinned version, a site, a configuration path and the service steps; GALE_INSTALL_DIR
	// names the directory.
	os.Remove(log)
	out, err = runInstall(t, script, []string{"GALE_INSTALL_DIR=" + prefix}, "--key", "K2", "--secret", "S2",
		"--site-id", "0190aaaa-0000-7000-8000-000000000001", "--version", "v1.0.0", "--config", "/etc/gale/agent.json")
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(bin); !bytes.Contains(got, []byte("# 1.0.0")) {
		t.Fatalf("installed %q, want the pinned 1.0.0", got)
	}
	calls, _ = os.ReadFile(log)
	want := "enroll K2 --server " + e.Server.URL + " --enrollment-secret S2 --site-id 0190aaaa-0000-7000-8000-000000000001 --quiet --config /etc/gale/agent.json\n" +
		"service install --config /etc/gale/agent.json\nservice start --config /etc/gale/agent.json\n"
	if string(calls) != want {
		t.Fatalf("agent calls = %q, want %q", calls, want)
	}

	// An unregistered version fails with the server's message.
	out, err = runInstall(t, script, nil, "--key", "K", "--secret", "S", "--prefix", prefix, "--no-service", "--version", "9.9.9")
	if err == nil || !strings.Contains(out, "HTTP 404") || !strings.Contains(out, "agent version 9.9.9 not found") {
		t.Fatalf("unregistered version: %v\n%s", err, out)
	}
}

func TestInstallScriptRefusesABadChecksum(t *testing.T) {
	e := apptest.New(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	registerFake(t, e, "1.0.0", fakeAgent(log, "1.0.0"))
	promote(t, e, "1.0.0")
	if _, err := e.App.DB.SQL.Exec(`UPDATE agent_releases SET sha256 = $1`, strings.Repeat("0", 64)); err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(dir, "bin")
	out, err := runInstall(t, installScript(t, e), nil, "--key", "K", "--secret", "S", "--prefix", prefix, "--no-service")
	if err == nil || !strings.Contains(out, "checksum mismatch") {
		t.Fatalf("bad checksum: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(prefix, "gale-agent")); !os.IsNotExist(err) {
		t.Fatalf("a binary with a bad checksum was installed: %v", err)
	}
	if _, err := os.Stat(log); !os.IsNotExist(err) {
		t.Fatal("the agent ran despite the bad checksum")
	}
}

// Without curl the script downloads with wget.
func TestInstallScriptWithWget(t *testing.T) {
	tools := []string{"sh", "wget", "sha256sum", "awk", "sed", "tr", "cut", "mktemp", "rm", "mkdir", "cp", "chmod", "mv",
		"uname", "head", "tail", "cat"}
	pathDir := t.TempDir()
	for _, tool := range tools {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("%s is not installed", tool)
		}
		if err := os.Symlink(p, filepath.Join(pathDir, tool)); err != nil {
			t.Fatal(err)
		}
	}
	e := apptest.New(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	registerFake(t, e, "1.0.0", fakeAgent(log, "1.0.0"))
	promote(t, e, "1.0.0")
	script := installScript(t, e)
	prefix := filepath.Join(dir, "bin")
	run := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(pathDir, "sh"), append([]string{script}, args...)...)
		cmd.Env = []string{"PATH=" + pathDir, "HOME=" + dir}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("--key", "K", "--secret", "S", "--prefix", prefix, "--no-service"); err != nil {
		t.Fatalf("install with wget: %v\n%s", err, out)
	}
	calls, _ := os.ReadFile(log)
	if want := "enroll K --server " + e.Server.URL + " --enrollment-secret S --quiet\n"; string(calls) != want {
		t.Fatalf("agent calls = %q, want %q", calls, want)
	}
	if out, err := run("--key", "K", "--secret", "S", "--prefix", prefix, "--no-service", "--version", "9.9.9"); err == nil ||
		!strings.Contains(out, "HTTP 404") {
		t.Fatalf("unregistered version with wget: %v\n%s", err, out)
	}
}

// The address is configuration, but the script quotes it all the same: a quote or a newline
// in it cannot run commands.
func TestInstallScriptQuotesTheServerAddress(t *testing.T) {
	e := apptest.New(t, func(c *config.Config) { c.PublicURL = "https://gale.example.com/it's\n$(touch /tmp/x)" })
	path := installScript(t, e)
	body, _ := os.ReadFile(path)
	if !strings.Contains(string(body), `server='https://gale.example.com/it'\''s`+"\n"+`$(touch /tmp/x)'`) {
		t.Fatalf("server assignment not quoted:\n%s", body)
	}
	if !strings.Contains(string(body), "curl -fsSL https://gale.example.com/it's$(touch /tmp/x)/api/v1/agents/install.sh") {
		t.Fatalf("usage comment spans lines:\n%s", body)
	}
	if out, err := exec.Command("sh", "-n", path).CombinedOutput(); err != nil {
		t.Fatalf("sh -n: %v\n%s", err, out)
	}
}
