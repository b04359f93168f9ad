//go:build !windows

package agent

import (
	"os/exec"
	"syscall"
)

// killTree runs the command in its own process group and makes cancellation kill the group,
// so a script's children do not outlive its timeout.
func killTree(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// powerCommand is the system command for reboot or shutdown.
func powerCommand(reboot bool) *exec.Cmd {
	if reboot {
		return exec.Command("shutdown", "-r", "now")
	}
	return exec.Command("shutdown", "-h", "now")
}
