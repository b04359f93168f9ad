//go:build !linux

package systemtools

import (
	"context"
	"runtime"

	"gale/internal/wire/agentproto"
)

// otherSystem answers services, event logs and scheduled tasks on systems other than
// Linux, where this agent does not manage them yet (Windows services, the Windows event
// log and Task Scheduler; launchd and the unified log on macOS).
type otherSystem struct{}

func newSystem(CronRoots) system { return otherSystem{} }

func unsupported(what string) error {
	return notSupported("%s are not available on %s in this agent version", what, runtime.GOOS)
}

func (otherSystem) services(context.Context) ([]agentproto.Service, error) {
	return nil, unsupported("services")
}

func (otherSystem) service(context.Context, string) (agentproto.Service, error) {
	return agentproto.Service{}, unsupported("services")
}

func (otherSystem) controlService(context.Context, string, string) (agentproto.Service, error) {
	return agentproto.Service{}, unsupported("services")
}

func (otherSystem) logs(context.Context) ([]agentproto.EventLog, error) {
	return nil, unsupported("event logs")
}

func (otherSystem) log(context.Context, string) (agentproto.EventLog, error) {
	return agentproto.EventLog{}, unsupported("event logs")
}

func (otherSystem) events(context.Context, agentproto.EventQuery) (agentproto.EventPage, error) {
	return agentproto.EventPage{}, unsupported("event logs")
}

func (otherSystem) event(context.Context, agentproto.EventArgs) (agentproto.Event, error) {
	return agentproto.Event{}, unsupported("event logs")
}

func (otherSystem) tasks(context.Context) ([]agentproto.Task, error) {
	return nil, unsupported("scheduled tasks")
}

func (otherSystem) task(context.Context, string) (agentproto.Task, error) {
	return agentproto.Task{}, unsupported("scheduled tasks")
}

func (otherSystem) taskHistory(context.Context, string) ([]agentproto.TaskRun, error) {
	return nil, unsupported("scheduled tasks")
}

func (otherSystem) runTask(context.Context, string) (agentproto.Done, error) {
	return agentproto.Done{}, unsupported("scheduled tasks")
}

func (otherSystem) setTaskEnabled(context.Context, string, bool) (agentproto.Task, error) {
	return agentproto.Task{}, unsupported("scheduled tasks")
}
