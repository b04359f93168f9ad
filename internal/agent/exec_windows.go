//go:build windows

package agent

import (
	"os/exec"
	"strconv"
)

// killTree kills the script and its children with taskkill on cancellation.
func killTree(cmd *exec.Cmd) {
	cmd.Cancel = func() error {
		return exec.Command("taskkill", "/T", "/F", "/PID", strconv.Itoa(cmd.Process.Pid)).Run()
	}
}

// powerCommand is the system command for reboot or shutdown.
func powerCommand(reboot bool) *exec.Cmd {
	if reboot {
		return exec.Command("shutdown", "/r", "/t", "0")
	}
	return exec.Command("shutdown", "/s", "/t", "0")
}
