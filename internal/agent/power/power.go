// Package power is the agent's reboot and shutdown commands, and their cancellation.
//
// A reboot or shutdown waits its delay on a timer, but it is first written to a state file
// next to the agent's configuration, so it survives an agent restart: a new agent re-arms it
// (one whose time has passed runs at once). Logged-in users are warned when it is scheduled
// and shortly before. Its outcome is reported when it is known: a reboot once the machine has
// booted again (the agent finds the state file and a newer boot time at start), a shutdown
// once the system took the order, either failed when the system refused it.
package power

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shirou/gopsutil/v4/host"

	"gale/internal/agent/atomicfile"
	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
)

// Options configure the power commands. Only StatePath is required; the others replace the
// system (tests use fakes: a test must never reboot its machine).
type Options struct {
	// StatePath is the file that keeps the scheduled commands (see StatePath).
	StatePath string
	// Run gives the system the order to reboot (true) or shut down; default the platform's
	// shutdown command. An error (a non-zero exit, a missing command) fails the command.
	Run func(reboot bool) error
	// Warn tells the logged-in users; default wall (msg on Windows) when present.
	Warn func(message string)
	// BootTime is when the machine last booted; default the system's (/proc/stat btime on Linux).
	BootTime func() (time.Time, error)
	// WarnBefore is how long before its time a scheduled command warns again; default a minute.
	WarnBefore time.Duration
	Logger     *slog.Logger
}

// StatePath is the state file of the agent whose configuration is at configPath: next to it,
// named after it, like the outbox.
func StatePath(configPath string) string {
	return strings.TrimSuffix(configPath, filepath.Ext(configPath)) + ".power.json"
}

// Power serves reboot, shutdown and cancel_command.
type Power struct {
	o Options

	mu     sync.Mutex // guards what follows and the state file
	ctx    context.Context
	report capability.Reporter
	armed  map[string]*timers
}

type timers struct{ warn, due *time.Timer }

// scheduled is one reboot or shutdown in the state file.
type scheduled struct {
	CommandID  string    `json:"commandId"`
	Kind       string    `json:"kind"`
	ReceivedAt time.Time `json:"receivedAt"`
	DueAt      time.Time `json:"dueAt"`
	// IssuedAt is when the system was given the order: from then on the machine is going
	// down, and it is too late to cancel.
	IssuedAt *time.Time `json:"issuedAt,omitempty"`
}

type state struct {
	Scheduled []scheduled `json:"scheduled"`
}

func (st *state) find(id string) int {
	return slices.IndexFunc(st.Scheduled, func(s scheduled) bool { return s.CommandID == id })
}

// New returns the power commands with the defaults filled in.
func New(o Options) *Power {
	if o.Run == nil {
		o.Run = runSystem
	}
	if o.Warn == nil {
		o.Warn = warnUsers
	}
	if o.BootTime == nil {
		o.BootTime = bootTime
	}
	if o.WarnBefore <= 0 {
		o.WarnBefore = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Power{o: o, ctx: context.Background(), armed: map[string]*timers{}}
}

// Register registers reboot, shutdown, the withdrawal of a scheduled one (the agent's
// cancel_command asks it) and the start that resumes what an earlier run of the agent left
// scheduled.
func (p *Power) Register(reg *capability.Registry) {
	reg.Command(agentproto.CommandReboot, p.schedule)
	reg.Command(agentproto.CommandShutdown, p.schedule)
	reg.OnCancel(p.withdraw)
	reg.OnStart(p.Start)
}

// Start resumes the state file: a command received before the machine last booted is
// reported completed (for a shutdown, only once the system had taken the order), one the
// system took without going down failed, the others are armed again. Timers stop when ctx
// ends (the agent stops); the state file stays for the next run.
func (p *Power) Start(ctx context.Context, report capability.Reporter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ctx, p.report = ctx, report
	context.AfterFunc(ctx, p.disarmAll)
	st, err := p.load()
	if err != nil {
		p.o.Logger.Error("could not read the scheduled reboots and shutdowns; they are lost", "error", err)
		return
	}
	boot, bootErr := p.o.BootTime()
	if bootErr != nil {
		p.o.Logger.Warn("the boot time is unknown; a reboot that happened cannot be told", "error", bootErr)
	}
	var owed []agentproto.CommandResult
	for _, s := range st.Scheduled {
		booted := bootErr == nil && boot.After(s.ReceivedAt)
		switch {
		case booted && (s.Kind == agentproto.CommandReboot || s.IssuedAt != nil):
			owed = append(owed, outcome(s, agentproto.ResultCompleted, "", map[string]any{"bootedAt": boot.UTC()}))
		case s.IssuedAt != nil:
			owed = append(owed, outcome(s, agentproto.ResultFailed,
				fmt.Sprintf("the system took the order at %s but the machine did not go down", s.IssuedAt.UTC().Format(time.RFC3339)), nil))
		default:
			p.arm(s)
		}
	}
	if len(owed) > 0 {
		go func() {
			for _, res := range owed {
				p.finish(res)
			}
		}()
	}
}

// schedule records a reboot or shutdown in the state file before it answers, arms it and
// answers ResultPending: the outcome is reported when it is known.
func (p *Power) schedule(_ context.Context, c agentproto.Command) agentproto.CommandResult {
	var pd agentproto.PowerDelay
	if len(c.Payload) > 0 {
		if err := json.Unmarshal(c.Payload, &pd); err != nil {
			return failed("unreadable payload: " + err.Error())
		}
	}
	now := time.Now()
	s := scheduled{CommandID: c.ID, Kind: c.Type, ReceivedAt: now, DueAt: now.Add(time.Duration(max(pd.DelaySeconds, 0)) * time.Second)}
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := p.load()
	if err != nil {
		return failed("could not read the scheduled reboots and shutdowns: " + err.Error())
	}
	if st.find(c.ID) >= 0 {
		// Delivered again (the server lost our receipt): it is already scheduled.
		return agentproto.CommandResult{Status: capability.ResultPending}
	}
	st.Scheduled = append(st.Scheduled, s)
	if err := p.save(st); err != nil {
		return failed(fmt.Sprintf("not scheduled: the %s could not be recorded, so its outcome could not be reported: %v", c.Type, err))
	}
	p.arm(s)
	return agentproto.CommandResult{Status: capability.ResultPending}
}

// withdraw takes back a scheduled reboot or shutdown: it leaves the state file, its timers
// stop and the users are told. held is false when id is not scheduled here.
func (p *Power) withdraw(id string) (res agentproto.CommandResult, held bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := p.load()
	if err != nil {
		return failed("could not read the scheduled reboots and shutdowns: " + err.Error()), true
	}
	i := st.find(id)
	if i < 0 {
		return res, false
	}
	s := st.Scheduled[i]
	if s.IssuedAt != nil {
		return failed(fmt.Sprintf("too late: the system took the order to %s at %s", s.Kind, s.IssuedAt.UTC().Format(time.RFC3339))), true
	}
	st.Scheduled = slices.Delete(st.Scheduled, i, i+1)
	if err := p.save(st); err != nil {
		return failed(fmt.Sprintf("the %s stays scheduled: could not record its cancellation: %v", s.Kind, err)), true
	}
	p.disarm(s.CommandID)
	p.warn(fmt.Sprintf("Gale: the scheduled %s of this machine is cancelled.", s.Kind))
	return capability.Cancelled(id, "while scheduled"), true
}

// arm warns the users and sets the timers of a scheduled command. p.mu is held.
func (p *Power) arm(s scheduled) {
	wait := max(time.Until(s.DueAt), 0)
	p.warn(announcement(s.Kind, wait, s.DueAt))
	t := &timers{due: time.AfterFunc(wait, func() { p.fire(s.CommandID) })}
	if wait > p.o.WarnBefore {
		t.warn = time.AfterFunc(wait-p.o.WarnBefore, func() { p.warn(announcement(s.Kind, p.o.WarnBefore, s.DueAt)) })
	}
	p.armed[s.CommandID] = t
}

// disarm stops the timers of one command. p.mu is held.
func (p *Power) disarm(id string) {
	if t, ok := p.armed[id]; ok {
		t.due.Stop()
		if t.warn != nil {
			t.warn.Stop()
		}
		delete(p.armed, id)
	}
}

func (p *Power) disarmAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range p.armed {
		p.disarm(id)
	}
}

// fire gives the system the order, unless the command was cancelled meanwhile. The order is
// recorded first: once given, a cancellation is too late.
func (p *Power) fire(id string) {
	p.mu.Lock()
	delete(p.armed, id)
	st, err := p.load()
	i := -1
	if err == nil {
		i = st.find(id)
	}
	if i < 0 || p.ctx.Err() != nil {
		p.mu.Unlock()
		return
	}
	now := time.Now()
	st.Scheduled[i].IssuedAt = &now
	s := st.Scheduled[i]
	if err := p.save(st); err != nil {
		p.o.Logger.Warn("could not record that the order was given; going ahead", "commandId", id, "error", err)
	}
	p.mu.Unlock()

	p.o.Logger.Info("giving the system the order", "kind", s.Kind, "commandId", id)
	if err := p.o.Run(s.Kind == agentproto.CommandReboot); err != nil {
		p.finish(outcome(s, agentproto.ResultFailed, fmt.Sprintf("the system refused the %s: %v", s.Kind, err), nil))
		return
	}
	if s.Kind == agentproto.CommandShutdown {
		// The machine does not come back by itself: the order taken is the outcome.
		p.finish(outcome(s, agentproto.ResultCompleted, "", map[string]any{"issuedAt": now.UTC()}))
	}
	// A reboot is reported once the machine is back (Start).
}

// finish reports an outcome, then forgets the command: an agent stopped in between reports
// it again at its next start, and the server ignores a second result.
func (p *Power) finish(res agentproto.CommandResult) {
	p.mu.Lock()
	report := p.report
	p.mu.Unlock()
	if report != nil {
		report(res)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := p.load()
	if err != nil {
		p.o.Logger.Error("could not read the scheduled reboots and shutdowns", "error", err)
		return
	}
	if i := st.find(res.CommandID); i >= 0 {
		st.Scheduled = slices.Delete(st.Scheduled, i, i+1)
		if err := p.save(st); err != nil {
			p.o.Logger.Error("could not forget a reported command; it is reported again at the next start", "commandId", res.CommandID, "error", err)
		}
	}
}

func (p *Power) warn(message string) {
	go p.o.Warn(message)
}

func outcome(s scheduled, status, errMsg string, result map[string]any) agentproto.CommandResult {
	res := agentproto.CommandResult{CommandID: s.CommandID, Status: status, Error: errMsg,
		DurationMs: time.Since(s.ReceivedAt).Milliseconds()}
	if result != nil {
		res.Result, _ = json.Marshal(result)
	}
	return res
}

func failed(msg string) agentproto.CommandResult {
	return agentproto.CommandResult{Status: agentproto.ResultFailed, Error: msg}
}

// announcement is the message to the users of a command due in wait.
func announcement(kind string, wait time.Duration, due time.Time) string {
	verb := "reboot"
	if kind == agentproto.CommandShutdown {
		verb = "shut down"
	}
	wait = wait.Round(time.Second)
	if wait <= 0 {
		return fmt.Sprintf("Gale: this machine will %s now. Save your work.", verb)
	}
	return fmt.Sprintf("Gale: this machine will %s in %s, at %s. Save your work.", verb, span(wait), due.Local().Format("15:04:05 MST"))
}

// span says a duration in words: "1 minute", "2 minutes 30 seconds".
func span(d time.Duration) string {
	unit := func(n int, name string) string {
		if n == 1 {
			return "1 " + name
		}
		return fmt.Sprintf("%d %ss", n, name)
	}
	m, s := int(d/time.Minute), int(d%time.Minute/time.Second)
	switch {
	case m == 0:
		return unit(s, "second")
	case s == 0:
		return unit(m, "minute")
	}
	return unit(m, "minute") + " " + unit(s, "second")
}

// load reads the state file; none is an empty state. p.mu is held.
func (p *Power) load() (state, error) {
	var st state
	data, err := os.ReadFile(p.o.StatePath)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("%s is damaged: %w", p.o.StatePath, err)
	}
	return st, nil
}

// save writes the state file through a synced temporary file and a rename, so a crash leaves
// the old state or the new one; an empty state removes the file. p.mu is held.
func (p *Power) save(st state) error {
	if len(st.Scheduled) == 0 {
		if err := os.Remove(p.o.StatePath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(p.o.StatePath, data, 0o600)
}

// runSystem runs the platform's shutdown command; its output explains a refusal.
func runSystem(reboot bool) error {
	out, err := command(reboot).CombinedOutput()
	if err != nil {
		if msg := strings.TrimSpace(string(out)); msg != "" {
			return fmt.Errorf("%w: %s", err, msg)
		}
		return err
	}
	return nil
}

// warnUsers writes message to the logged-in users when the platform's command for it is
// present; a machine without one has nobody to tell that way.
func warnUsers(message string) {
	cmd := warnCommand()
	cmd.Stdin = strings.NewReader(message + "\n")
	_ = cmd.Run()
}

func bootTime() (time.Time, error) {
	secs, err := host.BootTime()
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(int64(secs), 0), nil
}
