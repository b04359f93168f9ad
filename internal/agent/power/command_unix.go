//go:build !windows

package power

import "os/exec"

// command is the system command for reboot or shutdown.
func command(reboot bool) *exec.Cmd {
	if reboot {
		return exec.Command("shutdown", "-r", "now")
	}
	return exec.Command("shutdown", "-h", "now")
}

// warnCommand is the command that writes a message, read from its standard input, to the
// terminals of the logged-in users.
func warnCommand() *exec.Cmd { return exec.Command("wall") }
