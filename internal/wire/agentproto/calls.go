package agentproto

import (
	"encoding/json"
	"time"
)

// Call is a synchronous request from the server to an agent (the system tools). The agent
// answers with a CallResult carrying the same ID.
type Call struct {
	ID     string          `json:"id"`
	Method string          `json:"method"`
	Args   json.RawMessage `json:"args,omitempty"`
}

// CallResult answers a Call: Result on success, Error otherwise.
type CallResult struct {
	CallID string          `json:"callId"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *CallError      `json:"error,omitempty"`
}

// CallError is why a call failed, with a code the server maps to an HTTP status.
type CallError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *CallError) Error() string { return e.Message }

// Call error codes.
const (
	// ErrNotSupported: the operation does not exist on this operating system (400).
	ErrNotSupported = "NOT_SUPPORTED_ON_OS"
	// ErrNotFound: no such process, service, log, task or file (404).
	ErrNotFound = "NOT_FOUND"
	// ErrInvalid: bad arguments, a refused path, a file too large (400).
	ErrInvalid = "VALIDATION_ERROR"
	// ErrFailed: the operation was tried and failed on the machine (502 at the API).
	ErrFailed = "OPERATION_FAILED"
	// ErrUnknownMethod: the agent does not know the method (an older agent; 400).
	ErrUnknownMethod = "UNKNOWN_METHOD"
)

// System-tool methods and their arguments and results.
const (
	MethodProcessList = "processes.list" // no args → []Process
	MethodProcessGet  = "processes.get"  // PIDArgs → Process
	MethodProcessKill = "processes.kill" // KillArgs → Done

	MethodServiceList    = "services.list"    // no args → []Service
	MethodServiceGet     = "services.get"     // NameArgs → Service
	MethodServiceStart   = "services.start"   // NameArgs → Service (after the action)
	MethodServiceStop    = "services.stop"    // NameArgs → Service
	MethodServiceRestart = "services.restart" // NameArgs → Service

	MethodEventLogList   = "eventlogs.list"   // no args → []EventLog
	MethodEventLogGet    = "eventlogs.get"    // NameArgs → EventLog
	MethodEventLogEvents = "eventlogs.events" // EventQuery → EventPage
	MethodEventLogEvent  = "eventlogs.event"  // EventArgs → Event

	MethodTaskList    = "tasks.list"    // no args → []Task
	MethodTaskGet     = "tasks.get"     // PathArgs → Task
	MethodTaskHistory = "tasks.history" // PathArgs → []TaskRun
	MethodTaskRun     = "tasks.run"     // PathArgs → Done
	MethodTaskEnable  = "tasks.enable"  // PathArgs → Task
	MethodTaskDisable = "tasks.disable" // PathArgs → Task

	MethodFileList     = "files.list"     // PathArgs → []FileEntry
	MethodFileRead     = "files.read"     // FileReadArgs → FileContent (text or base64)
	MethodFileDownload = "files.download" // PathArgs → FileContent (always base64)
	MethodFileUpload   = "files.upload"   // FileUploadArgs → FileEntry

	MethodRegistryKeys        = "registry.keys"         // RegistryArgs → []RegistryKey
	MethodRegistryValues      = "registry.values"       // RegistryArgs → []RegistryValue
	MethodRegistryValueGet    = "registry.value.get"    // RegistryArgs → RegistryValue
	MethodRegistryValueSet    = "registry.value.set"    // RegistryValueArgs → RegistryValue
	MethodRegistryValueDelete = "registry.value.delete" // RegistryArgs → Done
	MethodRegistryKeyCreate   = "registry.key.create"   // RegistryArgs → Done
	MethodRegistryKeyDelete   = "registry.key.delete"   // RegistryArgs → Done
)

// File transfer limits, shared so server and agent refuse the same sizes.
const (
	MaxFileReadBytes     = 1 << 20  // files.read returns at most this much
	MaxFileDownloadBytes = 50 << 20 // files.download refuses larger files
	MaxFileUploadBytes   = 50 << 20 // files.upload refuses larger content
)

// Done answers an action that has nothing else to say.
type Done struct {
	OK      bool   `json:"ok"`
	Message string `json:"message,omitempty"`
}

// PIDArgs names a process.
type PIDArgs struct {
	PID int32 `json:"pid"`
}

// KillArgs names a process and the signal (default SIGTERM; "KILL" for SIGKILL).
type KillArgs struct {
	PID    int32  `json:"pid"`
	Signal string `json:"signal,omitempty"`
}

// NameArgs names a service or an event log.
type NameArgs struct {
	Name string `json:"name"`
}

// PathArgs names a scheduled task or a file.
type PathArgs struct {
	Path string `json:"path"`
}

// Process is one running process.
type Process struct {
	PID           int32     `json:"pid"`
	PPID          int32     `json:"ppid"`
	Name          string    `json:"name"`
	User          string    `json:"user,omitempty"`
	Status        string    `json:"status,omitempty"`
	CPUPercent    float64   `json:"cpuPercent"`
	MemoryBytes   uint64    `json:"memoryBytes"`
	MemoryPercent float32   `json:"memoryPercent"`
	Threads       int32     `json:"threads,omitempty"`
	StartedAt     time.Time `json:"startedAt"`
	CommandLine   string    `json:"commandLine,omitempty"`
	Executable    string    `json:"executable,omitempty"`
}

// Service is one system service (a systemd unit, a Windows service, a launchd job).
type Service struct {
	Name        string `json:"name"`
	DisplayName string `json:"displayName,omitempty"`
	Description string `json:"description,omitempty"`
	// Status: running, stopped, starting, stopping, failed, unknown.
	Status string `json:"status"`
	// StartType: automatic, manual, disabled, static.
	StartType string `json:"startType,omitempty"`
	PID       int32  `json:"pid,omitempty"`
	SubState  string `json:"subState,omitempty"`
}

// EventLog is one log source (a journald unit on Linux, an event log on Windows).
type EventLog struct {
	Name        string `json:"name"`
	DisplayName string `json:"displayName,omitempty"`
	Description string `json:"description,omitempty"`
}

// EventQuery pages a log's entries, newest first.
type EventQuery struct {
	Name  string    `json:"name"`
	Limit int       `json:"limit,omitempty"`
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	// Level keeps entries at this severity or worse: critical, error, warning, info, debug.
	Level string `json:"level,omitempty"`
	// Cursor continues after the last entry of a previous page.
	Cursor string `json:"cursor,omitempty"`
	// Contains keeps entries whose message contains this text, ignoring case.
	Contains string `json:"contains,omitempty"`
}

// EventArgs names one entry of a log.
type EventArgs struct {
	Name     string `json:"name"`
	RecordID string `json:"recordId"`
}

// Event is one log entry.
type Event struct {
	RecordID string         `json:"recordId"`
	Time     time.Time      `json:"time"`
	Level    string         `json:"level"`
	Source   string         `json:"source,omitempty"`
	Message  string         `json:"message"`
	PID      int32          `json:"pid,omitempty"`
	Fields   map[string]any `json:"fields,omitempty"`
}

// EventPage is a page of log entries.
type EventPage struct {
	Events     []Event `json:"events"`
	NextCursor string  `json:"nextCursor,omitempty"`
}

// Task is one scheduled task (a cron line or a systemd timer on Linux).
type Task struct {
	// Path identifies the task: "cron/<file>/<line>" or "timer/<unit>" on Linux.
	Path       string    `json:"path"`
	Name       string    `json:"name"`
	Kind       string    `json:"kind"`
	Schedule   string    `json:"schedule"`
	Command    string    `json:"command,omitempty"`
	User       string    `json:"user,omitempty"`
	Enabled    bool      `json:"enabled"`
	LastRunAt  time.Time `json:"lastRunAt,omitzero"`
	NextRunAt  time.Time `json:"nextRunAt,omitzero"`
	LastResult string    `json:"lastResult,omitempty"`
}

// TaskRun is one past run of a task.
type TaskRun struct {
	StartedAt time.Time `json:"startedAt"`
	Result    string    `json:"result,omitempty"`
	Message   string    `json:"message,omitempty"`
}

// FileEntry is one directory entry.
type FileEntry struct {
	Name       string    `json:"name"`
	Path       string    `json:"path"`
	Type       string    `json:"type"` // file, directory, symlink, other
	SizeBytes  int64     `json:"sizeBytes"`
	Mode       string    `json:"mode"`
	ModifiedAt time.Time `json:"modifiedAt"`
	Owner      string    `json:"owner,omitempty"`
}

// FileReadArgs reads part of a file.
type FileReadArgs struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset,omitempty"`
	Limit  int64  `json:"limit,omitempty"`
}

// FileContent is (part of) a file. Encoding is "utf-8" for text, else "base64".
type FileContent struct {
	Path      string `json:"path"`
	SizeBytes int64  `json:"sizeBytes"`
	Offset    int64  `json:"offset"`
	Encoding  string `json:"encoding"`
	Content   string `json:"content"`
	Truncated bool   `json:"truncated"`
	SHA256    string `json:"sha256,omitempty"`
}

// FileUploadArgs writes a file; Content is base64.
type FileUploadArgs struct {
	Path      string `json:"path"`
	Content   string `json:"content"`
	Overwrite bool   `json:"overwrite,omitempty"`
	Mode      string `json:"mode,omitempty"`
}

// RegistryArgs names a Windows registry key or value.
type RegistryArgs struct {
	Hive string `json:"hive"`
	Path string `json:"path"`
	Name string `json:"name,omitempty"`
}

// RegistryValueArgs sets a registry value.
type RegistryValueArgs struct {
	RegistryArgs
	Type string `json:"type"`
	Data any    `json:"data"`
}

// RegistryKey is one registry key.
type RegistryKey struct {
	Name       string `json:"name"`
	Path       string `json:"path"`
	SubKeys    int    `json:"subKeyCount"`
	ValueCount int    `json:"valueCount"`
}

// RegistryValue is one registry value.
type RegistryValue struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Data any    `json:"data"`
}

// File transfers ride streams (internal/wire/streams).
//
// Each stream carries one transfer. The agent speaks first with a header: one line of JSON
// ended by "\n". A header with "error" ({"code", "message"}, the codes of call errors) refuses
// the transfer; the agent then half-closes and waits for the server's FIN, which the server
// sends as soon as it read the refusal. A RESET instead of a header or a result means the
// transfer broke off (the connection dropped, the file could not be read to its end).
//
// StreamFileRead, args FileReadArgs {"path": absolute path, "offset": where to start, default
// 0; "limit" is not used: the rest of the file is sent}: the header
// is {"sizeBytes", "mode", "sha256"}: the bytes that follow, the file's permissions in octal
// ("0644") and the SHA-256 of those bytes. Then come exactly sizeBytes bytes and FIN. A file
// that reports no size (sizeBytes -1, the files of /proc) is sent to its end, without
// sha256. The server sends nothing; it half-closes once it read everything, which ends the
// stream.
//
// StreamFileWrite, args {"path", "mode" (octal, default the replaced file's or 0644),
// "overwrite" (replace an existing file), "sizeBytes" (optional: the count to expect)}: the
// header is {} once the path was checked; only then does the server send the bytes, and FIN
// after the last. The agent writes them to a temporary file beside the target, syncs it and
// renames it into place, then answers a result line, {"sizeBytes", "sha256", "entry": the
// new file's entry} or {"error"}, and half-closes. A stream that ends with a RESET, or a FIN
// before sizeBytes bytes, leaves the target as it was and no temporary file.
const (
	StreamFileRead  = "file.read"
	StreamFileWrite = "file.write"
)

// FileWriteArgs are the args of StreamFileWrite.
type FileWriteArgs struct {
	Path      string `json:"path"`
	Mode      string `json:"mode,omitempty"`
	Overwrite bool   `json:"overwrite,omitempty"`
	SizeBytes *int64 `json:"sizeBytes,omitempty"`
}

// FileStreamHeader is the agent's header line of a transfer, and a write's result line.
type FileStreamHeader struct {
	Error     *CallError `json:"error,omitempty"`
	SizeBytes *int64     `json:"sizeBytes,omitempty"`
	Mode      string     `json:"mode,omitempty"`
	SHA256    string     `json:"sha256,omitempty"`
	Entry     *FileEntry `json:"entry,omitempty"`
}
