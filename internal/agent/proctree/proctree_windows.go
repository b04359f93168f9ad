//go:build windows

package proctree

import (
	"os/exec"
	"strconv"
)

// KillOnCancel makes cancelling cmd kill it and its children with taskkill.
func KillOnCancel(cmd *exec.Cmd) {
	cmd.Cancel = func() error {
		return exec.Command("taskkill", "/T", "/F", "/PID", strconv.Itoa(cmd.Process.Pid)).Run()
	}
}
