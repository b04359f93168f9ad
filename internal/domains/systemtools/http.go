package systemtools

import (
	"context"
	"net/http"
	"strings"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/wire/agentproto"
)

type devicePath struct {
	DeviceID string `path:"deviceId" format:"uuid"`
}

type pidPath struct {
	DeviceID string `path:"deviceId" format:"uuid"`
	PID      int32  `path:"pid" minimum:"1"`
}

type killInput struct {
	DeviceID string `path:"deviceId" format:"uuid"`
	PID      int32  `path:"pid" minimum:"1"`
	Body     *struct {
		Signal string `json:"signal,omitempty" enum:"TERM,KILL" doc:"Default TERM; KILL cannot be ignored by the process."`
	}
}

type namePath struct {
	DeviceID string `path:"deviceId" format:"uuid"`
	Name     string `path:"name" minLength:"1" maxLength:"256"`
}

type eventsInput struct {
	DeviceID string    `path:"deviceId" format:"uuid"`
	Name     string    `path:"name" minLength:"1" maxLength:"256"`
	Limit    int       `query:"limit" minimum:"1" doc:"Default 100; above 1000 is clamped to 1000."`
	Since    time.Time `query:"since"`
	Until    time.Time `query:"until"`
	Level    string    `query:"level" enum:"critical,error,warning,info,debug" doc:"This level or worse."`
	Cursor   string    `query:"cursor" maxLength:"1024" doc:"nextCursor of the previous page."`
	Contains string    `query:"contains" maxLength:"256" doc:"Only entries containing this text, ignoring case."`
}

type eventPath struct {
	DeviceID string `path:"deviceId" format:"uuid"`
	Name     string `path:"name" minLength:"1" maxLength:"256"`
	RecordID string `path:"recordId" minLength:"1" maxLength:"1024"`
}

type taskPath struct {
	DeviceID string `path:"deviceId" format:"uuid"`
	Path     string `path:"path" minLength:"1" maxLength:"1024" doc:"The task's path, URL-encoded (cron/crontab/12 → cron%2Fcrontab%2F12)."`
}

type filesInput struct {
	DeviceID string `path:"deviceId" format:"uuid"`
	Path     string `query:"path" required:"true" minLength:"1" maxLength:"4096" doc:"Absolute path on the device."`
	Offset   int64  `query:"offset" minimum:"0" doc:"Reading a file: where to start."`
	Limit    int64  `query:"limit" minimum:"1" doc:"Reading a file: at most this many bytes (and at most 1 MiB)."`
}

type downloadInput struct {
	DeviceID string `path:"deviceId" format:"uuid"`
	Path     string `query:"path" required:"true" minLength:"1" maxLength:"4096"`
}

type uploadInput struct {
	DeviceID string `path:"deviceId" format:"uuid"`
	// The query parameters describe a raw (application/octet-stream) upload; a JSON body
	// carries the same in its fields.
	Path      string `query:"path" maxLength:"4096" doc:"Raw upload: absolute path of the new file; its directory must exist."`
	Overwrite bool   `query:"overwrite" doc:"Raw upload: replace an existing file; otherwise an existing file is a 400."`
	Mode      string `query:"mode" pattern:"^0?[0-7]{3}$" doc:"Raw upload: octal permissions such as 0644 (not on Windows)."`
	Body      *struct {
		Path      string `json:"path" minLength:"1" maxLength:"4096" doc:"Absolute path of the new file; its directory must exist."`
		Content   string `json:"content" doc:"The file's bytes, base64-encoded; at most 50 MiB."`
		Overwrite bool   `json:"overwrite,omitempty" doc:"Replace an existing file; otherwise an existing file is a 400."`
		Mode      string `json:"mode,omitempty" pattern:"^0?[0-7]{3}$" doc:"Octal permissions such as 0644 (not on Windows)."`
	}
}

type registryInput struct {
	DeviceID string `path:"deviceId" format:"uuid"`
	Hive     string `query:"hive" doc:"HKLM, HKCU, HKCR, HKU or HKCC."`
	Path     string `query:"path" maxLength:"1024"`
	Name     string `query:"name" maxLength:"256"`
}

type registrySetInput struct {
	DeviceID string `path:"deviceId" format:"uuid"`
	Body     agentproto.RegistryValueArgs
}

type listOut[T any] struct {
	Body struct {
		Data []T `json:"data"`
	}
}

type out[T any] struct{ Body T }

type fileListOrRead struct {
	Body struct {
		Type    string                  `json:"type" enum:"directory,file" doc:"directory: entries is set; file: content is set."`
		Entries []agentproto.FileEntry  `json:"entries,omitempty"`
		Content *agentproto.FileContent `json:"content,omitempty"`
	}
}

func list[T any](rows []T) *listOut[T] {
	o := &listOut[T]{}
	if rows == nil {
		rows = []T{}
	}
	o.Body.Data = rows
	return o
}

// Register adds the /system-tools routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "System tools"
	const base = "/system-tools/devices/{deviceId}"
	const offline = " The device's agent must be connected: 503 AGENT_OFFLINE otherwise, 504 AGENT_TIMEOUT when it does not answer in time."

	read := func(id, path, summary, desc string) httpapi.Route {
		return httpapi.Route{ID: id, Method: http.MethodGet, Path: base + path, Tag: tag, Permission: access.DevicesRead, Summary: summary, Description: desc + offline}
	}
	exec := func(id, method, path, summary, desc string) httpapi.Route {
		return httpapi.Route{ID: id, Method: method, Path: base + path, Tag: tag, Permission: access.DevicesExecute, Summary: summary, Description: desc + offline}
	}

	httpapi.Register(api, read("list-device-processes", "/processes", "List processes", "Every running process with CPU and memory use."),
		func(ctx context.Context, in *devicePath) (*listOut[agentproto.Process], error) {
			rows, err := s.Processes(ctx, in.DeviceID)
			return list(rows), err
		})
	httpapi.Register(api, read("get-device-process", "/processes/{pid}", "Get a process", ""),
		func(ctx context.Context, in *pidPath) (*out[agentproto.Process], error) {
			var p agentproto.Process
			err := s.call(ctx, in.DeviceID, agentproto.MethodProcessGet, agentproto.PIDArgs{PID: in.PID}, &p, defaultTimeout)
			return &out[agentproto.Process]{Body: p}, err
		})
	httpapi.Register(api, exec("kill-device-process", http.MethodPost, "/processes/{pid}/kill", "Kill a process",
		"Sends TERM (default) or KILL. PID 1 and the agent itself are refused."),
		func(ctx context.Context, in *killInput) (*out[agentproto.Done], error) {
			signal := ""
			if in.Body != nil {
				signal = in.Body.Signal
			}
			d, err := s.Kill(ctx, in.DeviceID, in.PID, signal)
			return &out[agentproto.Done]{Body: d}, err
		})

	httpapi.Register(api, read("list-device-services", "/services", "List services", "systemd units on Linux."),
		func(ctx context.Context, in *devicePath) (*listOut[agentproto.Service], error) {
			rows, err := s.Services(ctx, in.DeviceID)
			return list(rows), err
		})
	httpapi.Register(api, read("get-device-service", "/services/{name}", "Get a service", ""),
		func(ctx context.Context, in *namePath) (*out[agentproto.Service], error) {
			var sv agentproto.Service
			err := s.call(ctx, in.DeviceID, agentproto.MethodServiceGet, agentproto.NameArgs{Name: in.Name}, &sv, defaultTimeout)
			return &out[agentproto.Service]{Body: sv}, err
		})
	for _, verb := range []string{"start", "stop", "restart"} {
		httpapi.Register(api, exec(verb+"-device-service", http.MethodPost, "/services/{name}/"+verb, strings.ToUpper(verb[:1])+verb[1:]+" a service",
			"Answers the service's state afterwards."),
			func(ctx context.Context, in *namePath) (*out[agentproto.Service], error) {
				sv, err := s.ServiceAction(ctx, in.DeviceID, in.Name, verb)
				return &out[agentproto.Service]{Body: sv}, err
			})
	}

	httpapi.Register(api, read("list-device-event-logs", "/eventlogs", "List event logs", "journald on Linux: the system log, the kernel log and one per service."),
		func(ctx context.Context, in *devicePath) (*listOut[agentproto.EventLog], error) {
			rows, err := s.EventLogs(ctx, in.DeviceID)
			return list(rows), err
		})
	httpapi.Register(api, read("get-device-event-log", "/eventlogs/{name}", "Get an event log", ""),
		func(ctx context.Context, in *namePath) (*out[agentproto.EventLog], error) {
			var l agentproto.EventLog
			err := s.call(ctx, in.DeviceID, agentproto.MethodEventLogGet, agentproto.NameArgs{Name: in.Name}, &l, defaultTimeout)
			return &out[agentproto.EventLog]{Body: l}, err
		})
	httpapi.Register(api, read("list-device-events", "/eventlogs/{name}/events", "List a log's entries", "Newest first; page with nextCursor."),
		func(ctx context.Context, in *eventsInput) (*out[agentproto.EventPage], error) {
			q := agentproto.EventQuery{Name: in.Name, Limit: in.Limit, Since: in.Since, Until: in.Until, Level: in.Level, Cursor: in.Cursor, Contains: in.Contains}
			p, err := s.Events(ctx, in.DeviceID, q)
			if p.Events == nil {
				p.Events = []agentproto.Event{}
			}
			return &out[agentproto.EventPage]{Body: p}, err
		})
	httpapi.Register(api, read("get-device-event", "/eventlogs/{name}/events/{recordId}", "Get one log entry", ""),
		func(ctx context.Context, in *eventPath) (*out[agentproto.Event], error) {
			var e agentproto.Event
			err := s.call(ctx, in.DeviceID, agentproto.MethodEventLogEvent, agentproto.EventArgs{Name: in.Name, RecordID: in.RecordID}, &e, defaultTimeout)
			return &out[agentproto.Event]{Body: e}, err
		})

	httpapi.Register(api, read("list-device-tasks", "/tasks", "List scheduled tasks", "cron jobs and systemd timers on Linux."),
		func(ctx context.Context, in *devicePath) (*listOut[agentproto.Task], error) {
			var rows []agentproto.Task
			err := s.call(ctx, in.DeviceID, agentproto.MethodTaskList, struct{}{}, &rows, defaultTimeout)
			return list(rows), err
		})
	httpapi.Register(api, read("get-device-task", "/tasks/{path}", "Get a scheduled task", ""),
		func(ctx context.Context, in *taskPath) (*out[agentproto.Task], error) {
			var t agentproto.Task
			err := s.call(ctx, in.DeviceID, agentproto.MethodTaskGet, agentproto.PathArgs{Path: in.Path}, &t, defaultTimeout)
			return &out[agentproto.Task]{Body: t}, err
		})
	httpapi.Register(api, read("get-device-task-history", "/tasks/{path}/history", "A scheduled task's past runs", ""),
		func(ctx context.Context, in *taskPath) (*listOut[agentproto.TaskRun], error) {
			var rows []agentproto.TaskRun
			err := s.call(ctx, in.DeviceID, agentproto.MethodTaskHistory, agentproto.PathArgs{Path: in.Path}, &rows, defaultTimeout)
			return list(rows), err
		})
	httpapi.Register(api, exec("run-device-task", http.MethodPost, "/tasks/{path}/run", "Run a scheduled task now", "It starts in the background."),
		func(ctx context.Context, in *taskPath) (*out[agentproto.Done], error) {
			var d agentproto.Done
			err := s.act(ctx, in.DeviceID, agentproto.MethodTaskRun, agentproto.PathArgs{Path: in.Path}, &d, defaultTimeout)
			return &out[agentproto.Done]{Body: d}, err
		})
	for _, verb := range []string{"enable", "disable"} {
		httpapi.Register(api, exec(verb+"-device-task", http.MethodPost, "/tasks/{path}/"+verb, strings.ToUpper(verb[:1])+verb[1:]+" a scheduled task", ""),
			func(ctx context.Context, in *taskPath) (*out[agentproto.Task], error) {
				var t agentproto.Task
				err := s.act(ctx, in.DeviceID, "tasks."+verb, agentproto.PathArgs{Path: in.Path}, &t, defaultTimeout)
				return &out[agentproto.Task]{Body: t}, err
			})
	}

	httpapi.Register(api, exec("list-or-read-device-files", http.MethodGet, "/files", "List a directory or read a file",
		"A directory answers its entries; a file answers up to 1 MiB of content from offset (text as utf-8, else base64)."),
		func(ctx context.Context, in *filesInput) (*fileListOrRead, error) {
			o := &fileListOrRead{}
			entries, err := s.ListDir(ctx, in.DeviceID, in.Path)
			if err == nil {
				o.Body.Type, o.Body.Entries = "directory", entries
				if o.Body.Entries == nil {
					o.Body.Entries = []agentproto.FileEntry{}
				}
				return o, nil
			}
			if ae, ok := apperr.As(err); !ok || ae.Code != apperr.CodeValidation {
				return nil, err
			}
			var c agentproto.FileContent
			args := agentproto.FileReadArgs{Path: in.Path, Offset: in.Offset, Limit: min(in.Limit, agentproto.MaxFileReadBytes)}
			if err := s.act(ctx, in.DeviceID, agentproto.MethodFileRead, args, &c, defaultTimeout); err != nil {
				return nil, err
			}
			o.Body.Type, o.Body.Content = "file", &c
			return o, nil
		})
	httpapi.Register(api, exec("download-device-file", http.MethodGet, "/files/download", "Download a file",
		"The file's bytes as application/octet-stream, with Content-Length and X-Checksum-Sha256 (both left out for "+
			"files that report no size, such as those of /proc). They stream from the agent whatever the file's size; "+
			"an agent older than file streams sends at most 50 MiB. A transfer that breaks off cuts the connection."),
		func(ctx context.Context, in *downloadInput) (*DownloadOutput, error) {
			return s.Download(ctx, in.DeviceID, in.Path, TransferOptions{})
		})
	route := exec("upload-device-file", http.MethodPost, "/files/upload", "Upload a file",
		"Writes the file atomically: a temporary file beside it, synced, then renamed into place, so a failed upload "+
			"leaves nothing behind. Either a JSON body (content base64, at most 50 MiB) or, for files of any size up "+
			"to 10 GiB, the raw bytes as application/octet-stream with path, overwrite and mode as query parameters: "+
			"they stream to the agent as they arrive (an agent older than file streams takes raw uploads of at most 50 MiB).")
	route.MaxBodyBytes = MaxJSONUploadBodyBytes
	route.RawBodyBytes = MaxStreamedUploadBytes
	httpapi.Register(api, route, func(ctx context.Context, in *uploadInput) (*out[agentproto.FileEntry], error) {
		if raw, ok := httpapi.RawBodyFrom(ctx); ok {
			e, err := s.Upload(ctx, in.DeviceID, in.Path, raw, TransferOptions{Mode: in.Mode, Overwrite: in.Overwrite})
			return &out[agentproto.FileEntry]{Body: e}, err
		}
		if in.Body == nil {
			return nil, apperr.Invalid("body", "send a JSON body, or the raw bytes as application/octet-stream")
		}
		b := in.Body
		e, err := s.UploadBase64(ctx, in.DeviceID, b.Path, b.Content, TransferOptions{Mode: b.Mode, Overwrite: b.Overwrite})
		return &out[agentproto.FileEntry]{Body: e}, err
	})

	s.registerRegistry(api, base, tag, offline)
}

// registerRegistry adds the Windows registry routes. On other systems they answer 400
// NOT_SUPPORTED_ON_OS without asking the agent.
func (s *Service) registerRegistry(api *httpapi.Server, base, tag, offline string) {
	reg := func(id, method, path, summary string, perm access.Perm) httpapi.Route {
		return httpapi.Route{ID: id, Method: method, Path: base + path, Tag: tag, Permission: perm, Summary: summary,
			Description: "Windows only: other systems answer 400 NOT_SUPPORTED_ON_OS." + offline}
	}
	args := func(in *registryInput) agentproto.RegistryArgs {
		return agentproto.RegistryArgs{Hive: in.Hive, Path: in.Path, Name: in.Name}
	}
	httpapi.Register(api, reg("list-device-registry-keys", http.MethodGet, "/registry/keys", "List registry subkeys", "devices:execute"),
		func(ctx context.Context, in *registryInput) (*listOut[agentproto.RegistryKey], error) {
			var rows []agentproto.RegistryKey
			err := s.registry(ctx, in.DeviceID, agentproto.MethodRegistryKeys, args(in), &rows, false)
			return list(rows), err
		})
	httpapi.Register(api, reg("list-device-registry-values", http.MethodGet, "/registry/values", "List a key's values", "devices:execute"),
		func(ctx context.Context, in *registryInput) (*listOut[agentproto.RegistryValue], error) {
			var rows []agentproto.RegistryValue
			err := s.registry(ctx, in.DeviceID, agentproto.MethodRegistryValues, args(in), &rows, false)
			return list(rows), err
		})
	httpapi.Register(api, reg("get-device-registry-value", http.MethodGet, "/registry/value", "Get a registry value", "devices:execute"),
		func(ctx context.Context, in *registryInput) (*out[agentproto.RegistryValue], error) {
			var v agentproto.RegistryValue
			err := s.registry(ctx, in.DeviceID, agentproto.MethodRegistryValueGet, args(in), &v, false)
			return &out[agentproto.RegistryValue]{Body: v}, err
		})
	httpapi.Register(api, reg("set-device-registry-value", http.MethodPut, "/registry/value", "Set a registry value", "devices:execute"),
		func(ctx context.Context, in *registrySetInput) (*out[agentproto.RegistryValue], error) {
			var v agentproto.RegistryValue
			err := s.registry(ctx, in.DeviceID, agentproto.MethodRegistryValueSet, in.Body, &v, true)
			return &out[agentproto.RegistryValue]{Body: v}, err
		})
	httpapi.Register(api, reg("delete-device-registry-value", http.MethodDelete, "/registry/value", "Delete a registry value", "devices:execute"),
		func(ctx context.Context, in *registryInput) (*out[agentproto.Done], error) {
			var d agentproto.Done
			err := s.registry(ctx, in.DeviceID, agentproto.MethodRegistryValueDelete, args(in), &d, true)
			return &out[agentproto.Done]{Body: d}, err
		})
	httpapi.Register(api, reg("create-device-registry-key", http.MethodPost, "/registry/key", "Create a registry key", "devices:execute"),
		func(ctx context.Context, in *registryInput) (*out[agentproto.Done], error) {
			var d agentproto.Done
			err := s.registry(ctx, in.DeviceID, agentproto.MethodRegistryKeyCreate, args(in), &d, true)
			return &out[agentproto.Done]{Body: d}, err
		})
	httpapi.Register(api, reg("delete-device-registry-key", http.MethodDelete, "/registry/key", "Delete a registry key", "devices:execute"),
		func(ctx context.Context, in *registryInput) (*out[agentproto.Done], error) {
			var d agentproto.Done
			err := s.registry(ctx, in.DeviceID, agentproto.MethodRegistryKeyDelete, args(in), &d, true)
			return &out[agentproto.Done]{Body: d}, err
		})
}

func (s *Service) registry(ctx context.Context, deviceID, method string, args, out any, change bool) error {
	d, err := s.devices.Get(ctx, deviceID)
	if err != nil {
		return err
	}
	if d.OSType != "" && d.OSType != agentproto.OSWindows {
		return &apperr.Error{Kind: apperr.KindInvalid, Code: agentproto.ErrNotSupported,
			Message: "the registry exists only on Windows; this device runs " + d.OSType}
	}
	if change {
		return s.act(ctx, deviceID, method, args, out, defaultTimeout)
	}
	return s.call(ctx, deviceID, method, args, out, defaultTimeout)
}
