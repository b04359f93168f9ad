//go:build windows

package power

import "os/exec"

// command is the system command for reboot or shutdown.
func command(reboot bool) *exec.Cmd {
	if reboot {
		return exec.Command("shutdown", "/r", "/t", "0")
	}
	return exec.Command("shutdown", "/s", "/t", "0")
}
