package agent

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"time"

	"gale/internal/agent/proctree"
	"gale/internal/agentproto"
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
}

var livenessPipes = runtime.GOOS != "windows"

// watchdog state, shared between the supervising loop and the heartbeat loop.
type watchdog struct {
	opts     WatchdogOptions
	log      *slog.Logger
	mu       sync.Mutex
	lastBeat time.Time
	state    string // connected or failover
	alive    bool
}

// Watchdog runs the main agent as a child process and restarts it when it exits or stops
// sending liveness beats (hung). It reports its own heartbeat with the watchdog token, so the
// server can tell "machine down" from "agent down" and set mainAgentSilentSince.
func Watchdog(ctx context.Context, o WatchdogOptions) error {
	if o.Unresponsive <= 0 {
		o.Unresponsive = 45 * time.Second
	}
	w := &watchdog{opts: o, log: o.Logger.With("component", "watchdog"), state: "connected"}
	go w.report(ctx)
	delay := time.Second
	for ctx.Err() == nil {
		started := time.Now()
		w.superviseOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		w.mu.Lock()
		w.state, w.alive = "failover", false
		w.mu.Unlock()
		if time.Since(started) > 5*time.Minute {
			delay = time.Second
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

// superviseOnce starts the main agent and returns when it has exited or was killed.
func (w *watchdog) superviseOnce(ctx context.Context) {
	r, wr, err := os.Pipe()
	if err != nil {
		w.log.Error("cannot create the liveness pipe", "error", err)
		return
	}
	defer r.Close()
	// Killing the main agent kills its whole process tree, so nothing it started (a script
	// it was running when it hung) outlives it.
	runCtx, kill := context.WithCancel(context.Background())
	defer kill()
	cmd := exec.CommandContext(runCtx, w.opts.Executable, w.opts.Args...)
	proctree.KillOnCancel(cmd)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// Windows cannot pass extra descriptors: there the watchdog only restarts an agent that exits.
	if livenessPipes {
		cmd.ExtraFiles = []*os.File{wr}
		cmd.Env = append(os.Environ(), LivenessFDEnv+"=3")
	}
	if err := cmd.Start(); err != nil {
		wr.Close()
		w.log.Error("cannot start the main agent", "error", err)
		return
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
			return
		case <-ctx.Done():
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				kill()
				<-exited
			}
			return
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
				return
			}
		}
	}
}

func (w *watchdog) beat() {
	w.mu.Lock()
	w.lastBeat = time.Now()
	if !w.alive {
		w.alive, w.state = true, "connected"
	}
	w.mu.Unlock()
}

// report sends the watchdog's heartbeat over HTTP every heartbeat interval.
func (w *watchdog) report(ctx context.Context) {
	for ctx.Err() == nil {
		interval := time.Minute
		cfg, err := LoadConfig(w.opts.ConfigPath)
		if err == nil && cfg.Settings.HeartbeatIntervalSeconds > 0 {
			interval = time.Duration(cfg.Settings.HeartbeatIntervalSeconds) * time.Second
		}
		if err == nil && !cfg.Decommissioned && cfg.WatchdogToken != "" {
			w.mu.Lock()
			alive := w.alive
			hb := agentproto.Heartbeat{AgentVersion: "watchdog", MainAgentAlive: &alive, WatchdogState: w.state}
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
