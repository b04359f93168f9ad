//go:build !windows

package proctree

import (
	"os/exec"
	"syscall"
)

// KillOnCancel runs cmd in its own process group and makes cancelling it kill the whole group.
func KillOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
