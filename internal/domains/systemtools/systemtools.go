// Package systemtools is the API of the device system tools: processes, services, event
// logs, scheduled tasks, files and the Windows registry of one device, each request carried
// out by the device's agent over its live channel and answered synchronously.
package systemtools

import (
	"context"
	"encoding/json"
	"time"

	"gale/internal/domains/agenthub"
	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/platform/apperr"
	"gale/internal/wire/agentproto"
	"gale/internal/wire/streams"
)

// Caller sends a call to a device's agent and waits for the answer.
type Caller interface {
	// LiveChannel reports whether the agent holds its live channel on any node: calls travel
	// only over it.
	LiveChannel(ctx context.Context, deviceID string) (bool, error)
	// AwaitLiveChannel is LiveChannel that waits a moment for an agent that reported it is
	// opening the channel.
	AwaitLiveChannel(ctx context.Context, deviceID string) (agenthub.Reach, error)
	Call(ctx context.Context, deviceID, method string, args any, timeout time.Duration) (json.RawMessage, error)
	// OpenStream opens a stream of kind to the device's agent (file transfers).
	OpenStream(ctx context.Context, deviceID, kind string, args any) (*streams.Stream, error)
}

// CodeAgentOffline answers a request for a device whose agent cannot be asked now: the device
// is offline, or online over HTTP heartbeats only, without the live channel calls need.
const CodeAgentOffline = "AGENT_OFFLINE"

// Timeouts of a call: most answer in well under a second; file transfers take longer.
const (
	defaultTimeout  = 15 * time.Second
	transferTimeout = 120 * time.Second
)

// Service runs system-tool requests.
type Service struct {
	devices *devices.Service
	agents  Caller
	audit   *audit.Log
}

// Deps are what the service works with.
type Deps struct {
	Devices *devices.Service
	// Agents carries the calls and streams to the devices' agents.
	Agents Caller
	Audit  *audit.Log
}

// New returns the system-tools service.
func New(d Deps) *Service {
	return &Service{devices: d.Devices, agents: d.Agents, audit: d.Audit}
}

// device returns the device if the caller may reach it and its agent can be asked now.
func (s *Service) device(ctx context.Context, id string) (devices.Device, error) {
	d, err := s.devices.Get(ctx, id)
	if err != nil {
		return d, err
	}
	if d.DecommissionedAt != nil {
		return d, apperr.NotFound("device")
	}
	if d.Status != devices.StatusOnline {
		msg := "the device is " + d.Status + "; system tools need its agent connected"
		if d.LastSeen != nil {
			msg += " (last seen " + d.LastSeen.UTC().Format(time.RFC3339) + ")"
		}
		return d, &apperr.Error{Kind: apperr.KindUnavailable, Code: CodeAgentOffline, Message: msg}
	}
	// Without a live channel the call would only wait out its timeout, so say so now.
	reach, err := s.agents.AwaitLiveChannel(ctx, id)
	if err != nil {
		return d, err
	}
	switch reach {
	case agenthub.Connecting:
		return d, &apperr.Error{Kind: apperr.KindUnavailable, Code: CodeAgentOffline,
			Message: "the device's agent is connecting its live channel, which system tools need: retry in a few seconds"}
	case agenthub.HTTPOnly:
		return d, &apperr.Error{Kind: apperr.KindUnavailable, Code: CodeAgentOffline,
			Message: "the device reports over HTTP heartbeats only; system tools need its agent's live connection, which is down: retry once it reconnects"}
	}
	return d, nil
}

// call runs method on the device's agent and decodes the answer into out.
func (s *Service) call(ctx context.Context, deviceID, method string, args, out any, timeout time.Duration) error {
	if _, err := s.device(ctx, deviceID); err != nil {
		return err
	}
	raw, err := s.agents.Call(ctx, deviceID, method, args, timeout)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return &apperr.Error{Kind: apperr.KindUpstream, Code: agentproto.ErrFailed, Message: "the agent's answer was unreadable"}
	}
	return nil
}

// Processes lists the processes running on a device in scope, asking its agent.
func (s *Service) Processes(ctx context.Context, deviceID string) ([]agentproto.Process, error) {
	var rows []agentproto.Process
	err := s.call(ctx, deviceID, agentproto.MethodProcessList, struct{}{}, &rows, defaultTimeout)
	return rows, err
}

// Kill sends a process of a device in scope TERM ("" or "TERM") or KILL, and records it in
// the audit log; the agent refuses PID 1 and itself.
func (s *Service) Kill(ctx context.Context, deviceID string, pid int32, signal string) (agentproto.Done, error) {
	var d agentproto.Done
	err := s.act(ctx, deviceID, agentproto.MethodProcessKill, agentproto.KillArgs{PID: pid, Signal: signal}, &d, defaultTimeout)
	return d, err
}

// act is call for changes: it also records the action in the audit log.
func (s *Service) act(ctx context.Context, deviceID, method string, args, out any, timeout time.Duration) error {
	d, err := s.device(ctx, deviceID)
	if err != nil {
		return err
	}
	return s.record(ctx, d, method, describe(args), s.call(ctx, deviceID, method, args, out, timeout))
}

// record writes the audit entry of an action on the device, args being what the log keeps
// of its arguments, and returns the action's error, or the log's when the action succeeded.
func (s *Service) record(ctx context.Context, d devices.Device, method string, args any, err error) error {
	entry := audit.Entry{Action: "device.system_tool", ResourceType: "device", ResourceID: d.ID, ResourceName: d.Hostname,
		PartnerID: d.PartnerID, OrgID: d.OrgID, Details: map[string]any{"method": method, "args": args}}
	if err != nil {
		entry.Result = audit.ResultFailure
		entry.Details["error"] = err.Error()
	}
	if aerr := s.audit.RecordAction(ctx, entry); aerr != nil && err == nil {
		return aerr
	}
	return err
}

// describe is what the audit log keeps of a call's arguments: never an uploaded file's bytes.
func describe(args any) any {
	if up, ok := args.(agentproto.FileUploadArgs); ok {
		return map[string]any{"path": up.Path, "overwrite": up.Overwrite, "base64Length": len(up.Content)}
	}
	return args
}
