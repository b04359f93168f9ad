//go:build unix

package agent

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// lockWatchdog takes the watchdog lock at path, waiting while another watchdog holds it, and
// writes this process's PID into the file. The lock goes with the process, however it ends.
// It returns early, locking nothing, when ctx ends first.
func lockWatchdog(ctx context.Context, path string, log *slog.Logger) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for waited := false; ; waited = true {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, err
		}
		if !waited {
			log.Info("another watchdog is running; standing by until it ends", "lock", path)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return func() {}, nil
		case <-time.After(time.Second):
		}
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}

// detach starts cmd in a session of its own, so it outlives the process that starts it and
// the signals sent to that process's group.
func detach(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }

// watchdogCommand is the command that starts a watchdog; tests stand in for it.
var watchdogCommand = func(exe, configPath string) *exec.Cmd {
	return exec.Command(exe, "run", "--config", configPath)
}
