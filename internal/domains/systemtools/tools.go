package systemtools

import (
	"context"
	"net/http"
	"slices"

	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"gale/internal/platform/apperr"
	"gale/internal/wire/agentproto"
)

// ServiceVerbs are the actions on a service: each is an API operation (<verb>-device-service).
var ServiceVerbs = []string{"start", "stop", "restart"}

// Services lists the services of a device in scope, asking its agent.
func (s *Service) Services(ctx context.Context, deviceID string) ([]agentproto.Service, error) {
	var rows []agentproto.Service
	err := s.call(ctx, deviceID, agentproto.MethodServiceList, struct{}{}, &rows, defaultTimeout)
	return rows, err
}

// ServiceAction starts, stops or restarts (verb) a service of a device in scope and answers
// its state afterwards. The action is recorded in the audit log.
func (s *Service) ServiceAction(ctx context.Context, deviceID, name, verb string) (agentproto.Service, error) {
	var sv agentproto.Service
	if !slices.Contains(ServiceVerbs, verb) {
		return sv, apperr.Invalid("action", "start, stop or restart")
	}
	err := s.act(ctx, deviceID, "services."+verb, agentproto.NameArgs{Name: name}, &sv, defaultTimeout)
	return sv, err
}

// EventLogs lists the logs of a device in scope (journald's on Linux), asking its agent.
func (s *Service) EventLogs(ctx context.Context, deviceID string) ([]agentproto.EventLog, error) {
	var rows []agentproto.EventLog
	err := s.call(ctx, deviceID, agentproto.MethodEventLogList, struct{}{}, &rows, defaultTimeout)
	return rows, err
}

// Events pages the entries of a log of a device in scope, newest first: a limit of 0 asks
// for 100, one above 1000 for 1000.
func (s *Service) Events(ctx context.Context, deviceID string, q agentproto.EventQuery) (agentproto.EventPage, error) {
	q.Limit = min(q.Limit, 1000)
	if q.Limit <= 0 {
		q.Limit = 100
	}
	var p agentproto.EventPage
	err := s.call(ctx, deviceID, agentproto.MethodEventLogEvents, q, &p, defaultTimeout)
	return p, err
}

// ListDir lists the directory at path of a device in scope, directories first. A path that
// is not a directory is a validation error (the agent's).
func (s *Service) ListDir(ctx context.Context, deviceID, path string) ([]agentproto.FileEntry, error) {
	var entries []agentproto.FileEntry
	err := s.call(ctx, deviceID, agentproto.MethodFileList, agentproto.PathArgs{Path: path}, &entries, defaultTimeout)
	return entries, err
}

// ServeHTTP sends the download as the response to r outside the API (the console): its
// headers, then the bytes. As through the API, a transfer that breaks off once the status is
// sent cuts the connection (http.ErrAbortHandler).
func (o *DownloadOutput) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	for name, v := range map[string]string{"Content-Type": o.ContentType, "Content-Disposition": o.ContentDisposition,
		"Content-Length": o.ContentLength, "X-Checksum-Sha256": o.Checksum} {
		if v != "" {
			h.Set(name, v)
		}
	}
	w.WriteHeader(http.StatusOK)
	if o.Body != nil {
		o.Body(humago.NewContext(nil, r, w))
	}
}
