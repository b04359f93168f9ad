// Package e2e builds the gale binary and drives it as an operator and a client would.
package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gale/internal/platform/store/storetest"
	"gale/internal/testkit/proctest"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// build compiles cmd/gale and cmd/gale-agent once per test process.
func build(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "gale-e2e-"); buildErr != nil {
			return
		}
		for _, cmd := range []string{"gale", "gale-agent"} {
			out, err := exec.Command("go", "build", "-ldflags", "-X main.version=9.9.9-e2e", "-o", filepath.Join(binDir, cmd),
				"../../cmd/"+cmd).CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("build %s: %v: %s", cmd, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// galeBinary is the built server.
func galeBinary(t testing.TB) string { return filepath.Join(build(t), "gale") }

// agentBinary is the built agent.
func agentBinary(t testing.TB) string { return filepath.Join(build(t), "gale-agent") }

func galeEnv(t *testing.T, extra ...string) []string {
	env := append(os.Environ(), "DATABASE_URL="+storetest.URL(t), "DATA_DIR="+t.TempDir(), "LOG_FORMAT=json")
	return append(env, extra...)
}

func TestServeBootstrapLoginAndGracefulStop(t *testing.T) {
	addr := proctest.FreeAddr(t)
	cmd := exec.Command(galeBinary(t), "serve")
	cmd.Env = galeEnv(t, "LISTEN_ADDR="+addr, "BOOTSTRAP_ADMIN_EMAIL=admin@example.com",
		"BOOTSTRAP_ADMIN_PASSWORD=Change-Me-123")
	var logs proctest.Output
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	base := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := http.Get(base + "/ready")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not ready within 60s; log:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	res, err := http.Post(base+"/api/v1/auth/login", "application/json",
		strings.NewReader(`{"email":"admin@example.com","password":"Change-Me-123"}`))
	if err != nil {
		t.Fatal(err)
	}
	var session struct {
		AccessToken string `json:"accessToken"`
	}
	_ = json.NewDecoder(res.Body).Decode(&session)
	res.Body.Close()
	if res.StatusCode != 200 || session.AccessToken == "" {
		t.Fatalf("login = %d; log:\n%s", res.StatusCode, logs.String())
	}
	if strings.Contains(logs.String(), "Change-Me-123") {
		t.Fatal("the bootstrap password appears in the log")
	}
	if !strings.Contains(logs.String(), `"requestId"`) {
		t.Fatal("request log lines carry no requestId")
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("gale exited with %v after SIGTERM; log:\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("gale did not stop within 30s of SIGTERM")
	}
	if !strings.Contains(logs.String(), `"msg":"stopped"`) {
		t.Fatalf("no orderly stop in the log:\n%s", logs.String())
	}
}

func TestUserCommands(t *testing.T) {
	env := galeEnv(t)
	run := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command(galeBinary(t), args...)
		cmd.Env = env
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("Operator-Passw0rd\n", "user", "create", "--email", "ops@example.com", "--system"); err != nil ||
		!strings.Contains(out, "created user ops@example.com") {
		t.Fatalf("user create: %v\n%s", err, out)
	}
	if out, err := run("weak\n", "user", "create", "--email", "weak@example.com", "--system"); err == nil {
		t.Fatalf("user create with a weak password succeeded:\n%s", out)
	}
	if out, err := run("", "user", "reset-password", "--email", "ops@example.com", "--password", "Other-Passw0rd"); err != nil ||
		!strings.Contains(out, "password of ops@example.com changed") {
		t.Fatalf("reset-password: %v\n%s", err, out)
	}
	if out, err := run("", "user", "reset-password", "--email", "nobody@example.com", "--password", "Other-Passw0rd"); err == nil {
		t.Fatalf("reset-password of an unknown user succeeded:\n%s", out)
	}
	if out, err := run("", "migrate"); err != nil || !strings.Contains(out, "database is up to date") {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	if out, err := run("", "version"); err != nil || !strings.HasPrefix(out, "gale ") {
		t.Fatalf("version: %v\n%s", err, out)
	}
}
