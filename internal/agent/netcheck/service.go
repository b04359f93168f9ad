package netcheck

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"gale/internal/wire/agentproto"
)

// unitName is what a systemd unit name may be (the server checks it too).
var unitName = regexp.MustCompile(`^[A-Za-z0-9:_.@\\-]{1,255}$`)

// maxUnitOutput bounds what is kept of systemctl's answer.
const maxUnitOutput = 200

func serviceCheck(ctx context.Context, c agentproto.MonitorCheck) agentproto.MonitorCheckResult {
	if runtime.GOOS != "linux" {
		return failed("service checks run on Linux agents only, not on %s", runtime.GOOS)
	}
	start := time.Now()
	if c.Config.ServiceKind == agentproto.ServiceByProcess {
		pids, err := findProcess(c.Target)
		if err != nil {
			return failed("read the processes: %v", err)
		}
		if len(pids) == 0 {
			return failed("no process named %s is running", c.Target)
		}
		return agentproto.MonitorCheckResult{Status: agentproto.MonitorOnline, ResponseMs: ms(time.Since(start)),
			Details: map[string]any{"processes": len(pids), "pids": pids[:min(len(pids), 20)]}}
	}
	if !unitName.MatchString(c.Target) || strings.HasPrefix(c.Target, "-") {
		return failed("%q is not a systemd unit name", c.Target)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "systemctl", "is-active", "--", c.Target)
	cmd.Stdout = &out
	err := cmd.Run()
	state := strings.TrimSpace(truncate(out.String(), maxUnitOutput))
	if state == "" {
		return failed("systemctl is-active %s: %v", c.Target, err)
	}
	r := agentproto.MonitorCheckResult{Status: agentproto.MonitorOnline, ResponseMs: ms(time.Since(start)),
		Details: map[string]any{"state": state}}
	if state != "active" {
		r.Status, r.Error = agentproto.MonitorOffline, fmt.Sprintf("the unit %s is %s", c.Target, state)
	}
	return r
}

// findProcess returns the IDs of the processes whose name (comm) or program (the base name
// of the first word of their command line) is name.
func findProcess(name string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || !e.IsDir() {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil {
			continue
		}
		if strings.TrimSpace(string(comm)) == name {
			pids = append(pids, pid)
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		argv0, _, _ := bytes.Cut(cmdline, []byte{0})
		if filepath.Base(string(argv0)) == name {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
