package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"gale/internal/agent/proctree"
	"gale/internal/wire/agentproto"
)

// WatchdogOptions configure the supervisor that runs and watches the main agent.
type WatchdogOptions struct {
	ConfigPath string
	// Executable and Args start the main agent (this binary with run --no-watchdog).
	Executable string
	Args       []string
	Logger     *slog.Logger
	// Unresponsive is how long the main agent may go without a liveness beat before it is
	// killed and restarted.
	Unresponsive time.Duration
	// restartDelay is the first wait before a restart, doubling to 30 s (default 1 s); tests
	// shorten it.
	restartDelay time.Duration
}

var livenessPipes = runtime.GOOS != "windows"

// Watchdog states, as its heartbeat reports them.
const (
	watchdogConnected = "connected"
	watchdogFailover  = "failover"
	watchdogGaveUp    = "gave_up"
)

// A main agent that exits sooner than startupFailureWithin after it started failed at start;
// after maxStartupFailures of those in a row (a corrupt configuration, a broken binary)
// restarting it again is pointless, so the watchdog gives up, says why on its heartbeat, and
// tries again only when the configuration file changes or retryGivenUpAfter has passed.
const (
	startupFailureWithin = 10 * time.Second
	maxStartupFailures   = 5
	retryGivenUpAfter    = time.Hour
)

// WatchdogLockFile is the file, next to the configuration, that the running watchdog holds
// locked and writes its PID to. A second watchdog of the same configuration waits for the
// lock, so there is one watchdog (and one main agent) even when both the service manager and
// a main agent that lost its watchdog start a new one.
const WatchdogLockFile = "watchdog.pid"

// watchdog state, shared between the supervising loop and the heartbeat loop.
type watchdog struct {
	opts     WatchdogOptions
	log      *slog.Logger
	mu       sync.Mutex
	lastBeat time.Time
	state    string // watchdogConnected, watchdogFailover or watchdogGaveUp
	reason   string // why the watchdog gave up
	alive    bool
	// lastConfig is the last configuration read, with which the watchdog still reports when
	// the file has since become unreadable.
	lastConfig *Config
}

// Watchdog runs the main agent as a child process and restarts it when it exits or stops
// sending liveness beats (hung). It reports its own heartbeat with the watchdog token, so the
// server can tell "machine down" from "agent down" and set mainAgentSilentSince.
func Watchdog(ctx context.Context, o WatchdogOptions) error {
	if o.Unresponsive <= 0 {
		o.Unresponsive = 45 * time.Second
	}
	if o.restartDelay <= 0 {
		o.restartDelay = time.Second
	}
	w := &watchdog{opts: o, log: o.Logger.With("component", "watchdog"), state: watchdogConnected}
	unlock, err := lockWatchdog(ctx, filepath.Join(filepath.Dir(o.ConfigPath), WatchdogLockFile), w.log)
	if err != nil {
		w.log.Warn("cannot take the watchdog lock; running without it", "error", err)
	} else {
		defer unlock()
	}
	if ctx.Err() != nil {
		return nil
	}
	go w.report(ctx)
	delay := o.restartDelay
	failures := 0
	for ctx.Err() == nil {
		started := time.Now()
		exit := w.superviseOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		// The main agent exits for good once the server decommissioned the device, and has
		// recorded it in the configuration: the watchdog ends with it instead of restarting it.
		if cfg, err := LoadConfig(o.ConfigPath); err == nil && cfg.Decommissioned {
			w.log.Warn("the device was decommissioned; the watchdog stops")
			return ErrDecommissioned
		}
		w.mu.Lock()
		w.state, w.alive = watchdogFailover, false
		w.mu.Unlock()
		if time.Since(started) < startupFailureWithin {
			failures++
		} else {
			failures = 0
		}
		if failures >= maxStartupFailures {
			w.giveUp(ctx, fmt.Sprintf("the main agent failed at start %d times in a row; last: %s", failures, exit))
			failures, delay = 0, o.restartDelay
			continue
		}
		if time.Since(started) > 5*time.Minute {
			delay = o.restartDelay
		}
		w.log.Warn("restarting the main agent", "in", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(delay*2, 30*time.Second)
	}
	return nil
}

// giveUp reports why the main agent is not restarted and waits until the configuration file
// changes (someone repaired it), retryGivenUpAfter passes, or ctx ends.
func (w *watchdog) giveUp(ctx context.Context, reason string) {
	w.log.Error("giving up on the main agent", "reason", reason, "retryIn", retryGivenUpAfter)
	w.mu.Lock()
	w.state, w.reason = watchdogGaveUp, reason
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.state, w.reason = watchdogFailover, ""
		w.mu.Unlock()
	}()
	changed := configChanged(w.opts.ConfigPath)
	retry := time.NewTimer(retryGivenUpAfter)
	defer retry.Stop()
	poll := time.NewTicker(2 * time.Second)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-retry.C:
			return
		case <-poll.C:
			if changed() {
				w.log.Info("the configuration changed; starting the main agent again")
				return
			}
		}
	}
}

// configChanged returns a function that reports whether the file's size or modification time
// differ from what they are now.
func configChanged(path string) func() bool {
	stamp := func() string {
		info, err := os.Stat(path)
		if err != nil {
			return err.Error()
		}
		return fmt.Sprint(info.Size(), info.ModTime().UnixNano())
	}
	first := stamp()
	return func() bool { return stamp() != first }
}

// superviseOnce starts the main agent and returns when it has exited or was killed, saying
// how it ended.
func (w *watchdog) superviseOnce(ctx context.Context) string {
	r, wr, err := os.Pipe()
	if err != nil {
		w.log.Error("cannot create the liveness pipe", "error", err)
		return "cannot create the liveness pipe: " + err.Error()
	}
	defer r.Close()
	// Killing the main agent kills its whole process tree, so nothing it started (a script
	// it was running when it hung) outlives it.
	runCtx, kill := context.WithCancel(context.Background())
	defer kill()
	cmd := exec.CommandContext(runCtx, w.opts.Executable, w.opts.Args...)
	proctree.KillOnCancel(cmd)
	stderr := &lastLine{}
	cmd.Stdout, cmd.Stderr = os.Stdout, io.MultiWriter(os.Stderr, stderr)
	// Windows cannot pass extra descriptors: there the watchdog only restarts an agent that
	// exits, and the agent tells the watchdog died by waiting on its process.
	if livenessPipes {
		cmd.ExtraFiles = []*os.File{wr}
		cmd.Env = append(os.Environ(), LivenessFDEnv+"=3")
	} else {
		cmd.Env = append(os.Environ(), WatchdogPIDEnv+"="+strconv.Itoa(os.Getpid()))
	}
	if err := cmd.Start(); err != nil {
		wr.Close()
		w.log.Error("cannot start the main agent", "error", err)
		return "cannot start the main agent: " + err.Error()
	}
	wr.Close()
	w.log.Info("main agent started", "pid", cmd.Process.Pid)
	w.beat()
	go func() {
		buf := make([]byte, 64)
		for {
			if _, err := r.Read(buf); err != nil {
				return
			}
			w.beat()
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	check := time.NewTicker(time.Second)
	defer check.Stop()
	for {
		select {
		case err := <-exited:
			w.log.Warn("main agent exited", "error", err)
			how := "exited"
			if err != nil {
				how = err.Error()
			}
			if line := stderr.String(); line != "" {
				how += ": " + line
			}
			return how
		case <-ctx.Done():
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				kill()
				<-exited
			}
			return "stopped with the watchdog"
		case <-check.C:
			if !livenessPipes {
				w.beat()
			}
			w.mu.Lock()
			silent := time.Since(w.lastBeat)
			w.mu.Unlock()
			if silent > w.opts.Unresponsive {
				w.log.Warn("main agent stopped answering; killing it", "pid", cmd.Process.Pid, "silentFor", silent.Round(time.Second))
				kill()
				<-exited
				return "killed after " + silent.Round(time.Second).String() + " without a liveness beat"
			}
		}
	}
}

func (w *watchdog) beat() {
	w.mu.Lock()
	w.lastBeat = time.Now()
	if !w.alive {
		w.alive, w.state = true, watchdogConnected
	}
	w.mu.Unlock()
}

// report sends the watchdog's heartbeat over HTTP every heartbeat interval.
func (w *watchdog) report(ctx context.Context) {
	for ctx.Err() == nil {
		interval := time.Minute
		cfg, err := LoadConfig(w.opts.ConfigPath)
		w.mu.Lock()
		if err == nil {
			w.lastConfig = &cfg
		} else if w.lastConfig != nil {
			// A configuration broken since is likely why the main agent fails: say so with
			// the server and token read before.
			cfg, err = *w.lastConfig, nil
		}
		w.mu.Unlock()
		if err == nil {
			interval = heartbeatEvery(cfg)
		}
		if err == nil && !cfg.Decommissioned && cfg.WatchdogToken != "" {
			w.mu.Lock()
			alive := w.alive
			hb := agentproto.Heartbeat{AgentVersion: "watchdog", MainAgentAlive: &alive, WatchdogState: w.state, WatchdogReason: w.reason}
			w.mu.Unlock()
			c := newClient(cfg.Server, cfg.WatchdogToken)
			if err := c.do(ctx, http.MethodPost, apiPath(agentproto.PathHeartbeat, cfg.DeviceID), hb, nil, nil); err != nil && ctx.Err() == nil {
				w.log.Warn("watchdog heartbeat failed", "error", err)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
}

// heartbeatEvery is the watchdog's heartbeat interval: the server's, which the main agent
// saves in the configuration as it receives it, else a minute.
func heartbeatEvery(cfg Config) time.Duration {
	if cfg.Settings.HeartbeatIntervalSeconds > 0 {
		return time.Duration(cfg.Settings.HeartbeatIntervalSeconds) * time.Second
	}
	return time.Minute
}

// lastLine keeps the last non-empty line written to it (of the main agent's standard error:
// its fatal error, when it fails at start).
type lastLine struct {
	mu      sync.Mutex
	partial []byte
	last    string
}

func (l *lastLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimSpace(string(l.partial[:i])); line != "" {
			l.last = line
		}
		l.partial = l.partial[i+1:]
	}
	const maxLine = 1024
	if len(l.partial) > maxLine {
		l.partial = l.partial[len(l.partial)-maxLine:]
	}
	return len(p), nil
}

func (l *lastLine) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	last := l.last
	if line := strings.TrimSpace(string(l.partial)); line != "" {
		last = line
	}
	if len(last) > 500 {
		last = last[:500]
	}
	return last
}

// replaceWatchdog is what a main agent does when its watchdog died (its liveness pipe broke,
// or its process ended): it starts a new watchdog and stops, since nothing would restart it if
// it failed now. The new watchdog starts a fresh main agent; where the service manager
// restarts the watchdog as well, the watchdog lock (on Windows, the service manager itself)
// keeps a second one out. stop ends this main agent.
func (r *runner) replaceWatchdog(stop context.CancelFunc) {
	exe, err := os.Executable()
	if err != nil {
		r.log.Error("the watchdog died and cannot be restarted; running without it", "error", err)
		return
	}
	cmd := watchdogCommand(exe, r.opts.ConfigPath)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	detach(cmd)
	if err := cmd.Start(); err != nil {
		r.log.Error("the watchdog died and cannot be restarted; running without it", "error", err)
		return
	}
	r.log.Warn("the watchdog died; started a new one, which starts a new main agent", "pid", cmd.Process.Pid)
	_ = cmd.Process.Release()
	stop()
}
