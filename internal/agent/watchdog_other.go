//go:build !unix

package agent

import (
	"context"
	"log/slog"
	"os/exec"
)

// lockWatchdog locks nothing here: on Windows the service manager alone restarts the
// watchdog (the main agent cannot tell it died, having no liveness pipe), so there is never a
// second one to keep out.
func lockWatchdog(context.Context, string, *slog.Logger) (func(), error) { return func() {}, nil }

// detach needs nothing here: a started process outlives the one that started it.
func detach(*exec.Cmd) {}
