package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"gale/internal/agent/atomicfile"
	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
)

// CommandsPath is the file, next to the configuration at configPath, where the agent keeps
// the cancellations of commands it has not received yet and the commands that recently ended,
// so that what cancel_command answers holds across an agent restart.
func CommandsPath(configPath string) string {
	return strings.TrimSuffix(configPath, filepath.Ext(configPath)) + ".commands.json"
}

// The commands file stays small: a cancellation whose command never came and the memory of a
// command that ended are dropped after commandMemory, and each list keeps its newest
// maxRemembered entries. The server gives up on a command long before (it stays queued an hour).
const (
	commandMemory = 24 * time.Hour
	maxRemembered = 256
)

// errCancelled is the cause of a command's context when the server cancelled it.
var errCancelled = errors.New("cancelled by the server")

type remembered struct {
	CommandID string    `json:"commandId"`
	At        time.Time `json:"at"`
}

type commandsFile struct {
	// Cancelled are commands the server cancelled before they arrived: refused when they come.
	Cancelled []remembered `json:"cancelled,omitempty"`
	// Ended are commands whose result was reported: cancelling them is too late.
	Ended []remembered `json:"ended,omitempty"`
}

// commands tracks this agent's commands for their cancellation.
type commands struct {
	path string
	mu   sync.Mutex // guards what follows and the file
	// running are the commands a handler is carrying out, by ID.
	running map[string]context.CancelCauseFunc
	file    commandsFile
}

// openCommands reads the commands file at path; a missing one is empty. An unreadable one is
// returned empty with the error: the agent goes on without what it remembered.
func openCommands(path string) (*commands, error) {
	c := &commands{path: path, running: map[string]context.CancelCauseFunc{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &c.file)
	}
	if err != nil {
		c.file = commandsFile{}
		return c, fmt.Errorf("read %s: %w", path, err)
	}
	return c, nil
}

// begin registers a command about to run and returns its context, derived from parent.
// cancelled is true when the server cancelled it before it arrived (it must not run); ctx is
// nil when it is running already (delivered twice).
func (c *commands) begin(parent context.Context, id string) (ctx context.Context, cancelled bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := find(c.file.Cancelled, id); i >= 0 {
		// Refused, the command has ended: a second cancellation of it is too late.
		c.file.Cancelled = slices.Delete(c.file.Cancelled, i, i+1)
		c.file.Ended = append(c.file.Ended, remembered{CommandID: id, At: time.Now().UTC()})
		return nil, true, c.save()
	}
	if _, ok := c.running[id]; ok {
		return nil, false, nil
	}
	ctx, cancel := context.WithCancelCause(parent)
	c.running[id] = cancel
	return ctx, false, nil
}

// end removes a command that ran from the running ones; ended records that its result was
// reported (or is about to be), so a later cancellation is too late.
func (c *commands) end(id string, ended bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cancel, ok := c.running[id]; ok {
		cancel(nil)
		delete(c.running, id)
	}
	if !ended {
		return nil
	}
	return c.endedLocked(id)
}

// ended records that a command's result was reported.
func (c *commands) ended(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.endedLocked(id)
}

func (c *commands) endedLocked(id string) error {
	if find(c.file.Ended, id) >= 0 {
		return nil
	}
	c.file.Ended = append(c.file.Ended, remembered{CommandID: id, At: time.Now().UTC()})
	return c.save()
}

// cancel carries out a cancel_command for the command id: a running one has its context
// cancelled, one a capability holds pending is withdrawn, an ended one is too late, and one
// not received yet is remembered, durably, to be refused when it arrives.
func (c *commands) cancel(id string, withdraw func(string) (agentproto.CommandResult, bool)) agentproto.CommandResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	if stop, ok := c.running[id]; ok {
		stop(errCancelled)
		return capability.Cancelled(id, "while running")
	}
	if res, held := withdraw(id); held {
		return res
	}
	if find(c.file.Ended, id) >= 0 {
		return agentproto.CommandResult{Status: agentproto.ResultFailed, Error: "too late: the command already ended"}
	}
	if find(c.file.Cancelled, id) < 0 {
		c.file.Cancelled = append(c.file.Cancelled, remembered{CommandID: id, At: time.Now().UTC()})
		if err := c.save(); err != nil {
			c.file.Cancelled = c.file.Cancelled[:len(c.file.Cancelled)-1]
			return agentproto.CommandResult{Status: agentproto.ResultFailed,
				Error: "the cancellation could not be recorded, so the command could still run when it arrives: " + err.Error()}
		}
	}
	return capability.Cancelled(id, "before it arrived")
}

// save writes the file, first dropping what is too old or beyond the bounds. c.mu is held.
func (c *commands) save() error {
	c.file.Cancelled = trim(c.file.Cancelled)
	c.file.Ended = trim(c.file.Ended)
	b, err := json.Marshal(c.file)
	if err != nil {
		return err
	}
	return atomicfile.Write(c.path, b, 0o600)
}

func trim(list []remembered) []remembered {
	cutoff := time.Now().Add(-commandMemory)
	list = slices.DeleteFunc(list, func(r remembered) bool { return r.At.Before(cutoff) })
	if len(list) > maxRemembered {
		list = slices.Delete(list, 0, len(list)-maxRemembered)
	}
	return list
}

func find(list []remembered, id string) int {
	return slices.IndexFunc(list, func(r remembered) bool { return r.CommandID == id })
}
