// Package systools answers the system-tool calls the server sends to gale-agent: processes,
// services, event logs, scheduled tasks, files and the Windows registry.
//
// A Tools value, made by New, holds the options (denied paths, cron locations); Register
// registers its methods with the agent's capability registry. Processes and files work on every OS. On Linux,
// services are systemd units, event logs come from journald and scheduled tasks are cron
// lines and systemd timers; without systemd and journald, services are SysV init scripts,
// event logs the syslog files of /var/log and tasks cron lines only. On other systems those three families answer NOT_SUPPORTED_ON_OS
// for now. The registry answers NOT_SUPPORTED_ON_OS everywhere outside Windows.
package systemtools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
)

// Options configure a Tools.
type Options struct {
	// ConfigDir is the agent's own configuration directory. The file tools never read or
	// write inside it, so a technician cannot take the agent's credentials.
	ConfigDir string
	// DeniedPaths are further files or directories the file tools refuse.
	DeniedPaths []string
	// Cron says where the cron tables are (Linux only); the zero value means the standard
	// locations, DefaultCronRoots.
	Cron CronRoots
}

// CronRoots locate the cron tables.
type CronRoots struct {
	// SystemFiles are tables whose lines carry a user field (/etc/crontab).
	SystemFiles []string
	// SystemDirs hold tables whose lines carry a user field (/etc/cron.d).
	SystemDirs []string
	// UserDirs hold per-user tables named after their user, without a user field.
	UserDirs []string
}

// DefaultCronRoots are the cron locations of Debian, Ubuntu and the Red Hat family.
var DefaultCronRoots = CronRoots{
	SystemFiles: []string{"/etc/crontab"},
	SystemDirs:  []string{"/etc/cron.d"},
	UserDirs:    []string{"/var/spool/cron/crontabs", "/var/spool/cron"},
}

// Tools answers system-tool calls. It is safe for concurrent use.
type Tools struct {
	denied  []string
	selfPID int32
	sys     system
	// selfExe, parentPID and procInfo find the agent's watchdog; tests stand in for them.
	selfExe   string
	parentPID func() int32
	procInfo  func(ctx context.Context, pid int32) (ppid int32, exe string, err error)
	// freeSpace is the space free for the agent on the file system of dir; tests stand in for it.
	freeSpace func(dir string) (uint64, error)
}

// system is the part of the tools that depends on the operating system.
type system interface {
	services(ctx context.Context) ([]agentproto.Service, error)
	service(ctx context.Context, name string) (agentproto.Service, error)
	// controlService starts, stops or restarts a service and returns its new state.
	controlService(ctx context.Context, verb, name string) (agentproto.Service, error)

	logs(ctx context.Context) ([]agentproto.EventLog, error)
	log(ctx context.Context, name string) (agentproto.EventLog, error)
	events(ctx context.Context, q agentproto.EventQuery) (agentproto.EventPage, error)
	event(ctx context.Context, args agentproto.EventArgs) (agentproto.Event, error)

	tasks(ctx context.Context) ([]agentproto.Task, error)
	task(ctx context.Context, path string) (agentproto.Task, error)
	taskHistory(ctx context.Context, path string) ([]agentproto.TaskRun, error)
	runTask(ctx context.Context, path string) (agentproto.Done, error)
	setTaskEnabled(ctx context.Context, path string, enabled bool) (agentproto.Task, error)
}

// New returns Tools configured by opts.
func New(opts Options) *Tools {
	var denied []string
	for _, p := range append([]string{opts.ConfigDir}, opts.DeniedPaths...) {
		if p == "" {
			continue
		}
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		denied = append(denied, filepath.Clean(p))
	}
	cron := opts.Cron
	if len(cron.SystemFiles)+len(cron.SystemDirs)+len(cron.UserDirs) == 0 {
		cron = DefaultCronRoots
	}
	// Without its own executable the agent cannot tell its watchdog, and refuses nothing more.
	exe, _ := os.Executable()
	return &Tools{denied: denied, selfPID: int32(os.Getpid()), sys: newSystem(cron),
		selfExe: exe, parentPID: func() int32 { return int32(os.Getppid()) }, procInfo: readProcInfo, freeSpace: freeSpace}
}

// Register registers every system-tool method with reg.
func (t *Tools) Register(reg *capability.Registry) {
	for method, h := range t.methods() {
		reg.Call(method, h)
	}
	reg.Stream(agentproto.StreamFileRead, t.serveFileRead)
	reg.Stream(agentproto.StreamFileWrite, t.serveFileWrite)
}

// methods maps each method to its handler.
func (t *Tools) methods() map[string]capability.CallHandler {
	serviceControl := func(verb string) capability.CallHandler {
		return func(ctx context.Context, raw json.RawMessage) (any, error) {
			return withArgs(raw, func(a agentproto.NameArgs) (agentproto.Service, error) {
				return t.sys.controlService(ctx, verb, a.Name)
			})
		}
	}
	taskEnabled := func(enable bool) capability.CallHandler {
		return func(ctx context.Context, raw json.RawMessage) (any, error) {
			return withArgs(raw, func(a agentproto.PathArgs) (agentproto.Task, error) { return t.sys.setTaskEnabled(ctx, a.Path, enable) })
		}
	}
	registry := func(context.Context, json.RawMessage) (any, error) { return nil, registryUnsupported() }
	return map[string]capability.CallHandler{
		agentproto.MethodProcessList: func(ctx context.Context, _ json.RawMessage) (any, error) { return listProcesses(ctx) },
		agentproto.MethodProcessGet: func(ctx context.Context, raw json.RawMessage) (any, error) {
			return withArgs(raw, func(a agentproto.PIDArgs) (agentproto.Process, error) { return getProcess(ctx, a.PID) })
		},
		agentproto.MethodProcessKill: func(ctx context.Context, raw json.RawMessage) (any, error) {
			return withArgs(raw, func(a agentproto.KillArgs) (agentproto.Done, error) { return t.killProcess(ctx, a) })
		},

		agentproto.MethodServiceList: func(ctx context.Context, _ json.RawMessage) (any, error) { return t.sys.services(ctx) },
		agentproto.MethodServiceGet: func(ctx context.Context, raw json.RawMessage) (any, error) {
			return withArgs(raw, func(a agentproto.NameArgs) (agentproto.Service, error) { return t.sys.service(ctx, a.Name) })
		},
		agentproto.MethodServiceStart:   serviceControl("start"),
		agentproto.MethodServiceStop:    serviceControl("stop"),
		agentproto.MethodServiceRestart: serviceControl("restart"),

		agentproto.MethodEventLogList: func(ctx context.Context, _ json.RawMessage) (any, error) { return t.sys.logs(ctx) },
		agentproto.MethodEventLogGet: func(ctx context.Context, raw json.RawMessage) (any, error) {
			return withArgs(raw, func(a agentproto.NameArgs) (agentproto.EventLog, error) { return t.sys.log(ctx, a.Name) })
		},
		agentproto.MethodEventLogEvents: func(ctx context.Context, raw json.RawMessage) (any, error) {
			return withArgs(raw, func(a agentproto.EventQuery) (agentproto.EventPage, error) { return t.sys.events(ctx, a) })
		},
		agentproto.MethodEventLogEvent: func(ctx context.Context, raw json.RawMessage) (any, error) {
			return withArgs(raw, func(a agentproto.EventArgs) (agentproto.Event, error) { return t.sys.event(ctx, a) })
		},

		agentproto.MethodTaskList: func(ctx context.Context, _ json.RawMessage) (any, error) { return t.sys.tasks(ctx) },
		agentproto.MethodTaskGet: func(ctx context.Context, raw json.RawMessage) (any, error) {
			return withArgs(raw, func(a agentproto.PathArgs) (agentproto.Task, error) { return t.sys.task(ctx, a.Path) })
		},
		agentproto.MethodTaskHistory: func(ctx context.Context, raw json.RawMessage) (any, error) {
			return withArgs(raw, func(a agentproto.PathArgs) ([]agentproto.TaskRun, error) { return t.sys.taskHistory(ctx, a.Path) })
		},
		agentproto.MethodTaskRun: func(ctx context.Context, raw json.RawMessage) (any, error) {
			return withArgs(raw, func(a agentproto.PathArgs) (agentproto.Done, error) { return t.sys.runTask(ctx, a.Path) })
		},
		agentproto.MethodTaskEnable:  taskEnabled(true),
		agentproto.MethodTaskDisable: taskEnabled(false),

		agentproto.MethodFileList: func(_ context.Context, raw json.RawMessage) (any, error) {
			return withArgs(raw, func(a agentproto.PathArgs) ([]agentproto.FileEntry, error) { return t.listDir(a.Path) })
		},
		agentproto.MethodFileRead: func(_ context.Context, raw json.RawMessage) (any, error) { return withArgs(raw, t.readFile) },
		agentproto.MethodFileDownload: func(_ context.Context, raw json.RawMessage) (any, error) {
			return withArgs(raw, func(a agentproto.PathArgs) (agentproto.FileContent, error) { return t.downloadFile(a.Path) })
		},
		agentproto.MethodFileUpload: func(_ context.Context, raw json.RawMessage) (any, error) { return withArgs(raw, t.uploadFile) },

		agentproto.MethodRegistryKeys:        registry,
		agentproto.MethodRegistryValues:      registry,
		agentproto.MethodRegistryValueGet:    registry,
		agentproto.MethodRegistryValueSet:    registry,
		agentproto.MethodRegistryValueDelete: registry,
		agentproto.MethodRegistryKeyCreate:   registry,
		agentproto.MethodRegistryKeyDelete:   registry,
	}
}

// withArgs decodes a call's arguments into A and runs fn. Unknown fields are ignored so a
// newer server can add arguments an older agent does not know.
func withArgs[A, R any](raw json.RawMessage, fn func(A) (R, error)) (any, error) {
	var args A
	if len(raw) == 0 || string(raw) == "null" {
		return nil, invalid("arguments are required")
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, invalid("malformed arguments: %v", err)
	}
	return fn(args)
}

func invalid(format string, a ...any) error {
	return &agentproto.CallError{Code: agentproto.ErrInvalid, Message: fmt.Sprintf(format, a...)}
}

func notFound(format string, a ...any) error {
	return &agentproto.CallError{Code: agentproto.ErrNotFound, Message: fmt.Sprintf(format, a...)}
}

func failed(format string, a ...any) error {
	return &agentproto.CallError{Code: agentproto.ErrFailed, Message: fmt.Sprintf(format, a...)}
}

func notSupported(format string, a ...any) error {
	return &agentproto.CallError{Code: agentproto.ErrNotSupported, Message: fmt.Sprintf(format, a...)}
}
