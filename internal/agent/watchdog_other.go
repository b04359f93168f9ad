//go:build !unix

package agent

import (
	"context"
	"log/slog"
	"os/exec"
)

// lockWatchdog locks nothing here: on Windows the service manager alone starts the watchdog
// (a main agent whose watchdog died asks it to, see watchdogCommand), so there is never a
// second one to keep out.
func lockWatchdog(context.Context, string, *slog.Logger) (func(), error) { return func() {}, nil }

// detach needs nothing here: a started process outlives the one that started it.
func detach(*exec.Cmd) {}

// watchdogCommand starts the watchdog again through the service manager: started on its own
// it would run beside the one the service manager restarts after its recovery delay. When
// that restart is already under way the start fails, harmlessly.
var watchdogCommand = func(exe, configPath string) *exec.Cmd {
	return exec.Command(exe, "service", "start", "--config", configPath)
}
