package remote

import (
	"context"
	"net/http"
	"time"

	"gale/internal/domains/systemtools"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/wire/agentproto"
)

type idPath struct {
	ID string `path:"id" format:"uuid"`
}

type createInput struct {
	Body struct {
		DeviceID string `json:"deviceId" format:"uuid"`
		Type     string `json:"type" enum:"terminal,desktop,file_transfer"`
	}
}

type listInput struct {
	httpapi.PageQuery
	DeviceID string `query:"deviceId" format:"uuid"`
}

type sessionOutput struct{ Body RemoteSession }

type staleOutput struct {
	Body struct {
		Expired int64 `json:"expired" doc:"How many stale sessions were ended (failed)."`
	}
}

type ticketOutput struct{ Body TerminalTicket }

type connectCodeOutput struct {
	Body struct {
		Code      string    `json:"code" doc:"Single use; valid 2 minutes; bound to the caller."`
		ExpiresAt time.Time `json:"expiresAt"`
	}
}

type iceServersOutput struct {
	Body struct {
		ICEServers []agentproto.ICEServer `json:"iceServers" doc:"As RTCIceServer: STUN, and TURN with credentials of the TURN REST scheme. Empty without configuration: peers connect directly."`
	}
}

type offerInput struct {
	ID   string `path:"id" format:"uuid"`
	Body struct {
		SDP        string `json:"sdp,omitempty" maxLength:"65536" multiline:"true" doc:"The viewer's SDP offer."`
		Type       string `json:"type,omitempty" enum:"offer" doc:"offer, when sent."`
		ICERestart bool   `json:"iceRestart,omitempty" doc:"Without sdp: ask the agent to offer an ICE restart of the connection; answer it with /answer."`
	}
}

type connectInput struct {
	ID   string `path:"id" format:"uuid"`
	Body struct {
		Code string `json:"code" maxLength:"200" doc:"The connect code of POST /remote/sessions/{id}/desktop-connect-code."`
		SDP  string `json:"sdp" maxLength:"65536" multiline:"true" doc:"The viewer's SDP offer, its ICE candidates included."`
		Type string `json:"type,omitempty" enum:"offer" doc:"offer, when sent."`
	}
}

type descriptionOutput struct{ Body agentproto.DesktopDescription }

type answerInput struct {
	ID   string `path:"id" format:"uuid"`
	Body struct {
		SDP  string `json:"sdp" minLength:"1" maxLength:"65536" multiline:"true" doc:"The viewer's SDP answer to the agent's offer."`
		Type string `json:"type,omitempty" enum:"answer"`
	}
}

type iceInput struct {
	ID   string `path:"id" format:"uuid"`
	Body struct {
		Candidate     string  `json:"candidate" maxLength:"2048" doc:"As RTCIceCandidateInit; empty ends the viewer's candidates."`
		SDPMid        *string `json:"sdpMid,omitempty" maxLength:"256"`
		SDPMLineIndex *uint16 `json:"sdpMLineIndex,omitempty"`
	}
}

type doneOutput struct{ Body agentproto.Done }

type fileInput struct {
	ID   string `path:"id" format:"uuid"`
	Path string `query:"path" required:"true" minLength:"1" maxLength:"4096" doc:"Absolute path on the device."`
}

type fileUploadInput struct {
	ID        string `path:"id" format:"uuid"`
	Path      string `query:"path" required:"true" minLength:"1" maxLength:"4096" doc:"Absolute path of the new file; its directory must exist."`
	Overwrite bool   `query:"overwrite" doc:"Replace an existing file; otherwise an existing file is a 400."`
	Mode      string `query:"mode" pattern:"^0?[0-7]{3}$" doc:"Octal permissions such as 0644 (not on Windows)."`
	// The raw application/octet-stream body is the file; small files may come as JSON too.
	Body *struct {
		Content string `json:"content" doc:"The file's bytes, base64-encoded; at most 50 MiB."`
	}
}

type fileEntryOutput struct{ Body agentproto.FileEntry }

// Register adds the /remote routes, and the terminal WebSocket.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Remote access"
	const base = "/remote/sessions"
	const agent = " The device's agent must be connected: 503 AGENT_OFFLINE otherwise, 504 AGENT_TIMEOUT when it does not answer in time."
	route := func(id, method, path, summary, desc string, errors ...int) httpapi.Route {
		return httpapi.Route{ID: id, Method: method, Path: path, Tag: tag, Permission: access.RemoteAccess, Summary: summary,
			Description: desc, Errors: errors}
	}

	create := route("create-remote-session", http.MethodPost, base, "Open a remote session",
		"A session of a device in scope, pending until a viewer connects. 400 DEVICE_OFFLINE when the device's agent is not connected; "+
			"429 SESSION_LIMIT_REACHED when the organization has 10 active sessions or the caller 5.", 404, 429)
	create.Status, create.MFA = http.StatusCreated, true
	httpapi.Register(api, create, func(ctx context.Context, in *createInput) (*sessionOutput, error) {
		x, err := s.Create(ctx, in.Body.DeviceID, in.Body.Type)
		return &sessionOutput{x}, err
	})
	httpapi.Register(api, route("list-remote-sessions", http.MethodGet, base, "List active remote sessions",
		"Sessions pending, connecting or active, in scope, newest first."),
		func(ctx context.Context, in *listInput) (*httpapi.ListBody[RemoteSession], error) {
			return s.list(ctx, in, false)
		})
	httpapi.Register(api, route("list-remote-session-history", http.MethodGet, base+"/history", "List ended remote sessions",
		"Sessions disconnected, failed or denied, in scope, newest first, with their duration."),
		func(ctx context.Context, in *listInput) (*httpapi.ListBody[RemoteSession], error) {
			return s.list(ctx, in, true)
		})
	httpapi.Register(api, route("expire-stale-remote-sessions", http.MethodDelete, base+"/stale", "End stale remote sessions",
		"Fails the sessions in scope pending for more than 5 minutes or connecting for more than 2, and the active terminals "+
			"whose node stopped serving them for 2 (a periodic job does the same every minute), and says how many."),
		func(ctx context.Context, _ *struct{}) (*staleOutput, error) {
			n, err := s.ExpireStale(ctx)
			out := &staleOutput{}
			out.Body.Expired = n
			return out, err
		})
	httpapi.Register(api, route("get-remote-session", http.MethodGet, base+"/{id}", "Get a remote session", "", 404),
		func(ctx context.Context, in *idPath) (*sessionOutput, error) {
			x, err := s.Get(ctx, in.ID)
			return &sessionOutput{x}, err
		})
	httpapi.Register(api, route("end-remote-session", http.MethodPost, base+"/{id}/end", "End a remote session",
		"The session becomes disconnected; an open terminal closes within seconds. 409 SESSION_ENDED when it had ended.", 404, 409),
		func(ctx context.Context, in *idPath) (*sessionOutput, error) {
			x, err := s.End(ctx, in.ID)
			return &sessionOutput{x}, err
		})

	ticket := route("create-remote-terminal-ticket", http.MethodPost, base+"/{id}/ws-ticket", "Issue a terminal ticket",
		"A single-use ticket, valid 60 seconds and bound to the caller, to open the terminal WebSocket of a pending terminal "+
			"session (GET /api/v1"+TerminalPath+"?ticket=...; see the Remote sessions section of the API guide). "+
			"400 SESSION_TYPE_MISMATCH for other sessions; 409 when the session is not pending.", 404, 409)
	ticket.MFA = true
	httpapi.Register(api, ticket, func(ctx context.Context, in *idPath) (*ticketOutput, error) {
		t, err := s.IssueTerminalTicket(ctx, in.ID)
		return &ticketOutput{t}, err
	})
	code := route("create-remote-desktop-connect-code", http.MethodPost, base+"/{id}/desktop-connect-code", "Issue a desktop connect code",
		"A single-use code, valid 2 minutes and bound to the caller, for a desktop session that has not ended.", 404, 409)
	code.MFA = true
	httpapi.Register(api, code, func(ctx context.Context, in *idPath) (*connectCodeOutput, error) {
		raw, expires, err := s.ConnectCode(ctx, in.ID)
		out := &connectCodeOutput{}
		out.Body.Code, out.Body.ExpiresAt = raw, expires
		return out, err
	})
	connect := route("connect-remote-desktop-with-code", http.MethodPost, base+"/{id}/desktop-connect", "Connect a desktop viewer with a code",
		"For a desktop viewer without the user's bearer token: the connect code (single use) stands for the user it was issued to. "+
			"Relays the viewer's SDP offer, which must carry its ICE candidates (the code cannot authorise later /ice calls), and "+
			"answers the agent's SDP answer as /offer does. 401 INVALID_TICKET for an unknown, used or expired code, or one of "+
			"another session."+agent, 404, 409, 502, 503, 504)
	connect.Public, connect.Permission = true, ""
	httpapi.Register(api, connect, func(ctx context.Context, in *connectInput) (*descriptionOutput, error) {
		d, err := s.OfferWithCode(ctx, in.ID, in.Body.Code, in.Body.SDP)
		return &descriptionOutput{d}, err
	})
	httpapi.Register(api, route("get-remote-ice-servers", http.MethodGet, "/remote/ice-servers", "List ICE servers",
		"The STUN and TURN servers a desktop viewer may use; TURN credentials are the caller's, time-limited."),
		func(ctx context.Context, _ *struct{}) (*iceServersOutput, error) {
			servers, err := s.CallerICEServers(ctx)
			out := &iceServersOutput{}
			out.Body.ICEServers = servers
			return out, err
		})
	httpapi.Register(api, route("send-remote-desktop-offer", http.MethodPost, base+"/{id}/offer", "Send a WebRTC offer",
		"Relays the viewer's SDP offer to the agent and answers the agent's SDP answer, its ICE candidates included; "+
			"screenCapture says whether a video track carries the screen. With iceRestart and no sdp, the agent offers "+
			"instead (type offer), to be answered with /answer. 400 SESSION_TYPE_MISMATCH for other sessions."+agent, 404, 409, 502, 503, 504),
		func(ctx context.Context, in *offerInput) (*descriptionOutput, error) {
			d, err := s.Offer(ctx, in.ID, in.Body.SDP, in.Body.ICERestart)
			return &descriptionOutput{d}, err
		})
	httpapi.Register(api, route("send-remote-desktop-answer", http.MethodPost, base+"/{id}/answer", "Send a WebRTC answer",
		"Relays the viewer's SDP answer to an offer the agent made (an ICE restart, see /offer)."+agent, 404, 409, 502, 503, 504),
		func(ctx context.Context, in *answerInput) (*doneOutput, error) {
			err := s.Answer(ctx, in.ID, in.Body.SDP)
			return &doneOutput{agentproto.Done{OK: err == nil}}, err
		})
	httpapi.Register(api, route("send-remote-desktop-ice", http.MethodPost, base+"/{id}/ice", "Send an ICE candidate",
		"Relays one of the viewer's ICE candidates to the agent, after the offer. The agent's own candidates are in its SDP."+agent,
		404, 409, 502, 503, 504),
		func(ctx context.Context, in *iceInput) (*doneOutput, error) {
			err := s.ICE(ctx, in.ID, agentproto.DesktopICEArgs{Candidate: in.Body.Candidate, SDPMid: in.Body.SDPMid,
				SDPMLineIndex: in.Body.SDPMLineIndex})
			return &doneOutput{agentproto.Done{OK: err == nil}}, err
		})

	s.registerFiles(api, route, agent)

	api.Handle("GET "+httpapi.Prefix+TerminalPath, http.HandlerFunc(s.ServeTerminal))
}

// registerFiles adds the transfers of file_transfer sessions.
func (s *Service) registerFiles(api *httpapi.Server, route func(id, method, path, summary, desc string, errors ...int) httpapi.Route, agent string) {
	const path = "/remote/sessions/{id}/files"
	const session = " The session must be a file_transfer session (400 SESSION_TYPE_MISMATCH) that has not ended (409 SESSION_ENDED); " +
		"its first transfer makes it active."
	httpapi.Register(api, route("download-remote-session-file", http.MethodGet, path, "Download a file",
		"The bytes of the file at path on the session's device as application/octet-stream, with Content-Length and "+
			"X-Checksum-Sha256 unless the file reports no size; they stream from the agent. A file larger than "+
			"REMOTE_FILE_TRANSFER_MAX_BYTES is 413; a transfer that breaks off cuts the connection."+session+agent,
		404, 409, 413, 502, 503, 504),
		func(ctx context.Context, in *fileInput) (*systemtools.DownloadOutput, error) {
			return s.DownloadFile(ctx, in.ID, in.Path)
		})
	upload := route("upload-remote-session-file", http.MethodPut, path, "Upload a file",
		"Writes the raw application/octet-stream body to the file at path on the session's device, streamed to the agent "+
			"as it arrives, atomically (a failed upload leaves nothing), and answers the file's entry. A file larger than "+
			"REMOTE_FILE_TRANSFER_MAX_BYTES is 413: before any byte is written when Content-Length says so, else when the "+
			"body passes the limit. A JSON body {content} (base64, at most 50 MiB) is taken too."+session+agent,
		404, 409, 413, 502, 503, 504)
	upload.RawBodyBytes = s.opts.FileTransferMaxBytes
	upload.MaxBodyBytes = systemtools.MaxJSONUploadBodyBytes
	httpapi.Register(api, upload, func(ctx context.Context, in *fileUploadInput) (*fileEntryOutput, error) {
		var e agentproto.FileEntry
		var err error
		if raw, ok := httpapi.RawBodyFrom(ctx); ok {
			e, err = s.UploadFile(ctx, in.ID, in.Path, raw, in.Mode, in.Overwrite)
		} else if in.Body != nil {
			e, err = s.UploadFileBase64(ctx, in.ID, in.Path, in.Body.Content, in.Mode, in.Overwrite)
		} else {
			err = apperr.Invalid("body", "send the file's bytes as application/octet-stream, or a JSON body {content} in base64")
		}
		return &fileEntryOutput{e}, err
	})
}

func (s *Service) list(ctx context.Context, in *listInput, ended bool) (*httpapi.ListBody[RemoteSession], error) {
	page, err := in.Normalize(httpapi.MaxPageSize)
	if err != nil {
		return nil, err
	}
	rows, next, total, err := s.List(ctx, ended, in.DeviceID, page)
	if err != nil {
		return nil, err
	}
	return httpapi.ListPage(rows, next, page, total), nil
}
