package e2e

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gale/internal/agent/elevate"
	"gale/internal/app"
	"gale/internal/domains/pam"
	"gale/internal/testkit/apptest"
)

// TestPAMElevationOnARealAgent runs a root agent whose elevation socket and sudoers directory
// live in a directory of the test (never the host's /etc/sudoers.d), and an unprivileged user
// (nobody) asking through gale-agent elevate: a request no rule matches waits for a
// technician, is approved through the API and runs as root (id -u prints 0); an auto_deny rule
// refuses at once (exit 1, a message naming the denial); a granted sudoers entry is validated,
// written, and removed when the approval expires.
func TestPAMElevationOnARealAgent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the agent elevates, and the test runs the client as nobody")
	}
	if _, err := exec.LookPath("visudo"); err != nil {
		t.Skip("needs visudo")
	}
	dir, err := os.MkdirTemp("", "gale-pam-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sudoers := filepath.Join(dir, "sudoers.d")
	if err := errorsJoin(os.Chmod(dir, 0o755), os.Mkdir(sudoers, 0o750)); err != nil {
		t.Fatal(err)
	}
	// nobody runs a copy of the agent binary from a directory it can reach.
	client := filepath.Join(dir, "gale-agent")
	raw, err := os.ReadFile(agentBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(client, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "elevate.sock")
	t.Setenv(elevate.EnvSocket, sock)
	t.Setenv(elevate.EnvSudoersDir, sudoers)

	node := apptest.New(t)
	agent := startAgentWith(t, node, nil)
	admin := node.Admin()
	apptest.Eventually(t, 30*time.Second, func() bool { _, err := os.Stat(sock); return err == nil })

	type run struct {
		code           int
		stdout, stderr string
	}
	elevateAs := func(args ...string) <-chan run {
		done := make(chan run, 1)
		cmd := exec.Command(client, append([]string{"elevate", "--socket", sock, "--"}, args...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.Dir = "/"
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &errb, strings.NewReader("")
		go func() {
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				code = -1
				errb.WriteString(err.Error())
			}
			done <- run{code, out.String(), errb.String()}
		}()
		return done
	}
	wait := func(ch <-chan run) run {
		t.Helper()
		select {
		case r := <-ch:
			return r
		case <-time.After(60 * time.Second):
			t.Fatal("gale-agent elevate did not finish within 60s")
		}
		return run{}
	}
	pending := func() pam.PAMElevationRequest {
		t.Helper()
		var found pam.PAMElevationRequest
		apptest.Eventually(t, 30*time.Second, func() bool {
			var l struct{ Data []pam.PAMElevationRequest }
			node.Must(http.StatusOK, admin, "GET", "/api/v1/pam/elevation-requests?status=pending&deviceId="+agent.deviceID, nil).JSON(t, &l)
			if len(l.Data) > 0 {
				found = l.Data[0]
			}
			return len(l.Data) > 0
		})
		return found
	}

	t.Run("approved run prints uid 0", func(t *testing.T) {
		ch := elevateAs("id", "-u")
		req := pending()
		if req.User != "nobody" || req.UID != 65534 || req.Path != "/usr/bin/id" || len(req.SHA256) != 64 || req.CommandLine != "/usr/bin/id -u" {
			t.Fatalf("pending request = %+v", req)
		}
		select {
		case r := <-ch:
			t.Fatalf("the client finished before a decision: %+v", r)
		default:
		}
		node.Must(http.StatusOK, admin, "POST", "/api/v1/pam/elevation-requests/"+req.ID+"/respond", map[string]any{"decision": "approve"})
		r := wait(ch)
		if r.code != 0 || strings.TrimSpace(r.stdout) != "0" {
			t.Fatalf("approved id -u = %+v", r)
		}
	})

	t.Run("auto_deny refuses", func(t *testing.T) {
		node.Must(http.StatusCreated, admin, "POST", "/api/v1/pam/rules", map[string]any{"orgId": orgOf(t, node, admin, agent.deviceID),
			"name": "no echo", "matchPathGlob": "*/ECHO", "verdict": "auto_deny"})
		r := wait(elevateAs("echo", "hi"))
		if r.code == 0 || !strings.Contains(r.stderr, "denied") || r.stdout != "" {
			t.Fatalf("auto_deny = %+v", r)
		}
	})

	t.Run("grant expires", func(t *testing.T) {
		ch := make(chan run, 1)
		go func() {
			cmd := exec.Command(client, "elevate", "--socket", sock, "--grant", "--", "whoami")
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &errb, strings.NewReader("")
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			ch <- run{code, out.String(), errb.String()}
		}()
		req := pending()
		if !req.Grant {
			t.Fatalf("not a grant: %+v", req)
		}
		node.Must(http.StatusOK, admin, "POST", "/api/v1/pam/elevation-requests/"+req.ID+"/respond",
			map[string]any{"decision": "approve", "durationMinutes": 5})
		r := wait(ch)
		file := filepath.Join(sudoers, "gale-"+req.ID)
		body, err := os.ReadFile(file)
		if r.code != 0 || err != nil || !strings.Contains(string(body), "nobody ALL=(root) NOPASSWD: /usr/bin/whoami") {
			t.Fatalf("grant = %+v, file %q %v", r, body, err)
		}
		if st, _ := os.Stat(file); st.Mode().Perm() != 0o440 {
			t.Fatalf("grant mode = %v", st.Mode())
		}
		var active struct{ Data []pam.PAMElevationRequest }
		node.Must(http.StatusOK, admin, "GET", "/api/v1/pam/active?deviceId="+agent.deviceID, nil).JSON(t, &active)
		if len(active.Data) != 2 {
			t.Fatalf("active = %d, want the run and the grant", len(active.Data))
		}
		// Time passes: the approval is due; the expiry job tells the agent, which drops the entry.
		if _, err := node.App.DB.SQL.Exec(`UPDATE pam_requests SET expires_at = $1 WHERE id = $2`, time.Now().Add(-time.Second).UTC(), req.ID); err != nil {
			t.Fatal(err)
		}
		if err := app.Service[*pam.Service](node.App).Expire(context.Background()); err != nil {
			t.Fatal(err)
		}
		apptest.Eventually(t, 30*time.Second, func() bool { _, err := os.Stat(file); return os.IsNotExist(err) })
		left, _ := filepath.Glob(filepath.Join(sudoers, "*"))
		if len(left) != 0 {
			t.Fatalf("left in the sudoers directory: %v", left)
		}
	})
}

func errorsJoin(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func orgOf(t *testing.T, node *apptest.Env, c apptest.Caller, deviceID string) string {
	t.Helper()
	var d struct {
		OrgID string `json:"orgId"`
	}
	node.Must(http.StatusOK, c, "GET", "/api/v1/devices/"+deviceID, nil).JSON(t, &d)
	return d.OrgID
}
