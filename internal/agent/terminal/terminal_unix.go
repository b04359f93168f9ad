//go:build !windows

package terminal

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/creack/pty"
)

type unixPTY struct {
	f   *os.File
	cmd *exec.Cmd
}

func (p *unixPTY) Read(b []byte) (int, error)  { return p.f.Read(b) }
func (p *unixPTY) Write(b []byte) (int, error) { return p.f.Write(b) }

func (p *unixPTY) Resize(cols, rows uint16) error {
	return pty.Setsize(p.f, &pty.Winsize{Cols: cols, Rows: rows})
}

// Close kills what the shell started: its process group (the shell leads its own session,
// so the group is its PID) and the groups of its jobs, which an interactive shell puts in
// groups of their own within its session; then it reaps the shell and closes the terminal.
func (p *unixPTY) Close() error {
	sid := p.cmd.Process.Pid
	_ = syscall.Kill(-sid, syscall.SIGKILL)
	for _, pid := range sessionMembers(sid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = p.cmd.Wait()
	return p.f.Close()
}

// start runs the login shell of the agent's user on a new pseudo-terminal.
func start(cols, rows uint16) (shellTerm, string, error) {
	shell := loginShell()
	home, _ := os.UserHomeDir()
	if home == "" {
		home = "/"
	}
	cmd := exec.Command(shell)
	// A leading dash in argv[0] makes the shell a login shell.
	cmd.Args = []string{"-" + filepath.Base(shell)}
	cmd.Dir = home
	cmd.Env = append(withoutTerm(os.Environ()), "TERM=xterm-256color", "SHELL="+shell, "HOME="+home)
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: cols, Rows: rows})
	if err != nil {
		return nil, "", fmt.Errorf("start %s on a terminal: %w", shell, err)
	}
	return &unixPTY{f: f, cmd: cmd}, shell, nil
}

// loginShell is the shell /etc/passwd gives the agent's user, or /bin/sh.
func loginShell() string {
	uid := strconv.Itoa(os.Getuid())
	if f, err := os.Open("/etc/passwd"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Split(sc.Text(), ":")
			if len(fields) == 7 && fields[2] == uid && filepath.IsAbs(fields[6]) && executable(fields[6]) {
				return fields[6]
			}
		}
	}
	return "/bin/sh"
}

func executable(p string) bool {
	info, err := os.Stat(p)
	return err == nil && !info.IsDir() && info.Mode()&0o111 != 0
}

func withoutTerm(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "TERM=") && !strings.HasPrefix(kv, "SHELL=") && !strings.HasPrefix(kv, "HOME=") {
			out = append(out, kv)
		}
	}
	return out
}
