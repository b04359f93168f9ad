package systemtools

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// linuxSystem answers services, event logs and tasks from systemd, journald and cron. Its
// commands and probes are fields so tests can stand in for them.
type linuxSystem struct {
	// root is where the init scripts (etc/init.d) and plain-text logs (var/log) are looked
	// for, "/" but in tests.
	root     string
	run      runFunc
	systemd  func() bool
	journald func() bool
	cron     CronRoots
	// cronMu serializes edits of cron tables.
	cronMu sync.Mutex
}

// runFunc runs a command and returns its standard output; a failure is a *cmdError.
type runFunc func(ctx context.Context, name string, args ...string) ([]byte, error)

func newSystem(cron CronRoots) system {
	return &linuxSystem{root: "/", run: runCommand, systemd: systemdRunning, journald: journaldRunning, cron: cron}
}

// systemdRunning is sd_booted(): systemd creates /run/systemd/system when it is PID 1.
func systemdRunning() bool {
	if _, err := exec.LookPath("systemctl"); err != nil {
		return false
	}
	info, err := os.Stat("/run/systemd/system")
	return err == nil && info.IsDir()
}

// journaldRunning reports whether journald is collecting logs, which it can do without
// systemd as PID 1 (in some containers).
func journaldRunning() bool {
	if _, err := exec.LookPath("journalctl"); err != nil {
		return false
	}
	if _, err := os.Stat("/run/systemd/journal/socket"); err == nil {
		return true
	}
	return systemdRunning()
}

func (s *linuxSystem) requireSystemd() error {
	if !s.systemd() {
		return notSupported("systemd is not running on this machine")
	}
	return nil
}

// cmdError is a command that failed, with what it wrote on standard error.
type cmdError struct {
	cmd    string
	stderr string
	err    error
}

func (e *cmdError) Error() string {
	msg := e.stderr
	if msg == "" {
		msg = e.err.Error()
	}
	return e.cmd + ": " + msg
}

func (e *cmdError) Unwrap() error { return e.err }

func runCommand(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	// A fixed locale keeps dates and messages in the form the parsers expect.
	cmd.Env = append(os.Environ(), "LC_ALL=C", "SYSTEMD_COLORS=0", "SYSTEMD_PAGER=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), &cmdError{
			cmd:    name + " " + strings.Join(args, " "),
			stderr: strings.TrimSpace(stderr.String()),
			err:    err,
		}
	}
	return stdout.Bytes(), nil
}
