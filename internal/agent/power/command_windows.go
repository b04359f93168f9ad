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

// warnCommand is the command that shows a message, read from its standard input, in the
// sessions of the logged-in users.
func warnCommand() *exec.Cmd { return exec.Command("msg", "*") }
