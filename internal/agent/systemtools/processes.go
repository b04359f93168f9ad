package systemtools

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shirou/gopsutil/v4/mem"
	"github.com/shirou/gopsutil/v4/process"

	"gale/internal/wire/agentproto"
)

// listProcesses returns every running process. A process that exits while it is being read
// is left out.
func listProcesses(ctx context.Context) ([]agentproto.Process, error) {
	procs, err := process.ProcessesWithContext(ctx)
	if err != nil {
		return nil, failed("listing processes: %v", err)
	}
	r := newProcessReader(ctx)
	out := make([]agentproto.Process, 0, len(procs))
	for _, p := range procs {
		if info, ok := r.read(p); ok {
			out = append(out, info)
		}
	}
	return out, nil
}

func getProcess(ctx context.Context, pid int32) (agentproto.Process, error) {
	if pid <= 0 {
		return agentproto.Process{}, invalid("pid is required")
	}
	p, err := process.NewProcessWithContext(ctx, pid)
	if err != nil {
		return agentproto.Process{}, processError(pid, err)
	}
	info, ok := newProcessReader(ctx).read(p)
	if !ok {
		return agentproto.Process{}, notFound("no process %d", pid)
	}
	return info, nil
}

// killProcess sends SIGTERM (or SIGKILL when asked); on Windows both end the process. It
// refuses init, the agent itself and its watchdog, which a technician would only end by
// mistake.
func (t *Tools) killProcess(ctx context.Context, a agentproto.KillArgs) (agentproto.Done, error) {
	if a.PID <= 1 {
		return agentproto.Done{}, invalid("refusing to signal pid %d", a.PID)
	}
	if a.PID == t.selfPID {
		return agentproto.Done{}, invalid("refusing to signal the agent itself")
	}
	if t.isWatchdog(ctx, a.PID) {
		return agentproto.Done{}, invalid("refusing to signal the agent's watchdog")
	}
	var kill bool
	switch strings.TrimPrefix(strings.ToUpper(a.Signal), "SIG") {
	case "", "TERM":
	case "KILL":
		kill = true
	default:
		return agentproto.Done{}, invalid("unknown signal %q: use TERM or KILL", a.Signal)
	}
	p, err := process.NewProcessWithContext(ctx, a.PID)
	if err != nil {
		return agentproto.Done{}, processError(a.PID, err)
	}
	if kill {
		err = p.KillWithContext(ctx)
	} else {
		err = p.TerminateWithContext(ctx)
	}
	if err != nil {
		return agentproto.Done{}, processError(a.PID, err)
	}
	sig := "SIGTERM"
	if kill {
		sig = "SIGKILL"
	}
	return agentproto.Done{OK: true, Message: "sent " + sig + " to process " + strconv.Itoa(int(a.PID))}, nil
}

// isWatchdog reports whether pid is a watchdog of this agent. The watchdog is the agent's
// own executable run without --no-watchdog, and it is either the agent's parent (it started
// the agent) or the agent's child (the agent started a new one after the last died). Asking
// for both the kinship and the executable keeps a reused PID from being mistaken for it.
func (t *Tools) isWatchdog(ctx context.Context, pid int32) bool {
	if t.selfExe == "" {
		return false
	}
	ppid, exe, err := t.procInfo(ctx, pid)
	if err != nil || !sameExecutable(exe, t.selfExe) {
		return false
	}
	return pid == t.parentPID() || ppid == t.selfPID
}

// sameExecutable compares executable paths; an executable replaced on disk by an upgrade
// reads as "path (deleted)" in /proc.
func sameExecutable(a, b string) bool {
	return a != "" && strings.TrimSuffix(a, " (deleted)") == strings.TrimSuffix(b, " (deleted)")
}

// readProcInfo gives a process's parent and executable.
func readProcInfo(ctx context.Context, pid int32) (int32, string, error) {
	p, err := process.NewProcessWithContext(ctx, pid)
	if err != nil {
		return 0, "", err
	}
	ppid, err := p.PpidWithContext(ctx)
	if err != nil {
		return 0, "", err
	}
	exe, err := p.ExeWithContext(ctx)
	return ppid, exe, err
}

func processError(pid int32, err error) error {
	switch {
	case errors.Is(err, process.ErrorProcessNotRunning), errors.Is(err, os.ErrProcessDone),
		errors.Is(err, syscall.ESRCH), errors.Is(err, os.ErrNotExist):
		return notFound("no process %d", pid)
	case errors.Is(err, os.ErrPermission):
		return failed("process %d: permission denied", pid)
	}
	return failed("process %d: %v", pid, err)
}

// processReader reads processes, sharing the machine's memory size and user names between
// them.
type processReader struct {
	ctx      context.Context
	memTotal uint64
	users    userNames
}

func newProcessReader(ctx context.Context) *processReader {
	r := &processReader{ctx: ctx, users: userNames{}}
	if vm, err := mem.VirtualMemoryWithContext(ctx); err == nil {
		r.memTotal = vm.Total
	}
	return r
}

// read fills what it can: a field the agent may not read (another user's executable, say)
// stays empty. It reports false when the process is gone.
func (r *processReader) read(p *process.Process) (agentproto.Process, bool) {
	ctx := r.ctx
	name, err := p.NameWithContext(ctx)
	if err != nil {
		if running, rerr := p.IsRunningWithContext(ctx); rerr != nil || !running {
			return agentproto.Process{}, false
		}
	}
	info := agentproto.Process{PID: p.Pid, Name: name, User: r.username(p)}
	info.PPID, _ = p.PpidWithContext(ctx)
	if st, err := p.StatusWithContext(ctx); err == nil && len(st) > 0 {
		info.Status = st[0]
	}
	// gopsutil gives the average over the process's life, which needs no sampling delay.
	info.CPUPercent, _ = p.CPUPercentWithContext(ctx)
	if m, err := p.MemoryInfoWithContext(ctx); err == nil {
		info.MemoryBytes = m.RSS
		if r.memTotal > 0 {
			info.MemoryPercent = float32(100 * float64(m.RSS) / float64(r.memTotal))
		}
	}
	info.Threads, _ = p.NumThreadsWithContext(ctx)
	if ms, err := p.CreateTimeWithContext(ctx); err == nil {
		info.StartedAt = time.UnixMilli(ms).UTC()
	}
	info.CommandLine, _ = p.CmdlineWithContext(ctx)
	info.Executable, _ = p.ExeWithContext(ctx)
	return info, true
}

func (r *processReader) username(p *process.Process) string {
	uids, err := p.UidsWithContext(r.ctx)
	if err != nil || len(uids) == 0 {
		// Windows has no uids; gopsutil asks the process token instead.
		name, _ := p.UsernameWithContext(r.ctx)
		return name
	}
	return r.users.lookup(strconv.FormatUint(uint64(uids[0]), 10))
}
