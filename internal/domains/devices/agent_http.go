package devices

import (
	"context"
	"net/http"
	"strings"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/ratelimit"
	"gale/internal/wire/agentproto"
)

type enrollInput struct {
	Secret string `header:"X-Enrollment-Secret" doc:"The enrollment secret, instead of the body field."`
	Body   agentproto.EnrollRequest
}

type enrollOutput struct{ Body agentproto.EnrollResponse }

type agentAuth struct {
	Authorization string `header:"Authorization" doc:"Bearer <agent token>"`
	AgentID       string `path:"agentId" format:"uuid"`
}

type heartbeatInput struct {
	Authorization string `header:"Authorization" doc:"Bearer <agent token> (or the watchdog's token)"`
	AgentID       string `path:"agentId" format:"uuid"`
	Body          agentproto.Heartbeat
}

type heartbeatOutput struct{ Body agentproto.HeartbeatResponse }

type inventoryInput struct {
	Authorization string `header:"Authorization"`
	AgentID       string `path:"agentId" format:"uuid"`
	Body          agentproto.Inventory
}

type resultInput struct {
	Authorization string `header:"Authorization"`
	AgentID       string `path:"agentId" format:"uuid"`
	CommandID     string `path:"commandId" format:"uuid"`
	Body          agentproto.CommandResult
}

// agent authenticates the agent token of a request to the device of the path.
func (s *Service) agent(ctx context.Context, authorization, deviceID string) (Agent, context.Context, error) {
	token := ""
	if len(authorization) > 7 && strings.EqualFold(authorization[:7], "bearer ") {
		token = strings.TrimSpace(authorization[7:])
	}
	a, err := s.AuthenticateAgent(ctx, token)
	if err != nil {
		return a, ctx, err
	}
	if a.DeviceID != deviceID {
		return a, ctx, apperr.Forbidden("the token belongs to another device")
	}
	return a, AgentContext(ctx, a), nil
}

func (s *Service) registerAgentRoutes(api *httpapi.Server) {
	const tag = "Enrollment keys and agents"

	httpapi.Register(api, httpapi.Route{ID: "enroll-agent", Agent: true, Method: http.MethodPost, Path: agentproto.PathEnroll, Tag: tag, Public: true,
		Status: http.StatusCreated, Summary: "Enroll an agent",
		Description: "Authenticated by the enrollment secret (the key's own, else AGENT_ENROLLMENT_SECRET), in the body or the " +
			"X-Enrollment-Secret header. 401 for an unknown, expired, revoked or used-up key; 403 for a wrong secret. The answer " +
			"carries the agent's tokens once."},
		func(ctx context.Context, in *enrollInput) (*enrollOutput, error) {
			if s.limiter != nil && s.opts.EnrollPerMinute > 0 {
				rule := ratelimit.Rule{Limit: s.opts.EnrollPerMinute, Window: time.Minute}
				if _, err := s.limiter.Hit(ctx, "enroll:ip:"+access.RequestFrom(ctx).IP, rule); err != nil {
					return nil, err
				}
			}
			if in.Body.EnrollmentSecret == "" {
				in.Body.EnrollmentSecret = in.Secret
			}
			r, err := s.Enroll(ctx, in.Body)
			return &enrollOutput{Body: r}, err
		})

	httpapi.Register(api, httpapi.Route{ID: "agent-heartbeat", Agent: true, Method: http.MethodPost, Path: agentproto.PathHeartbeat, Tag: tag, Public: true,
		Summary: "Agent heartbeat (HTTP fallback)", Description: "For agents without a live channel, and for the watchdog. The answer " +
			"carries up to 10 queued commands, which become sent."},
		func(ctx context.Context, in *heartbeatInput) (*heartbeatOutput, error) {
			a, ctx, err := s.agent(ctx, in.Authorization, in.AgentID)
			if err != nil {
				return nil, err
			}
			waiting, err := s.Heartbeat(ctx, a, in.Body)
			if err != nil {
				return nil, err
			}
			out := &heartbeatOutput{Body: agentproto.HeartbeatResponse{Commands: []agentproto.Command{}}}
			if waiting {
				cmds, err := s.TakeQueued(ctx, a.DeviceID)
				if err != nil {
					return nil, err
				}
				if cmds != nil {
					out.Body.Commands = cmds
				}
			}
			return out, nil
		})

	httpapi.Register(api, httpapi.Route{ID: "agent-inventory", Agent: true, Method: http.MethodPost, Path: agentproto.PathInventory, Tag: tag, Public: true,
		Status: http.StatusNoContent, MaxBodyBytes: 32 << 20, Summary: "Agent inventory report",
		Description: "Replaces the device's inventory as a whole (software up to 10,000 packages)."},
		func(ctx context.Context, in *inventoryInput) (*struct{}, error) {
			a, ctx, err := s.agent(ctx, in.Authorization, in.AgentID)
			if err != nil {
				return nil, err
			}
			if a.Role != agentproto.RoleAgent {
				return nil, apperr.Forbidden("only the main agent reports inventory")
			}
			return nil, s.StoreInventory(ctx, a, in.Body)
		})

	httpapi.Register(api, httpapi.Route{ID: "agent-command-result", Agent: true, Method: http.MethodPost, Path: agentproto.PathCommandResult, Tag: tag,
		Public: true, Status: http.StatusNoContent, MaxBodyBytes: 8 << 20, Summary: "Agent command result",
		Description: "The one way agents report a command's result (the live channel takes none): the answer confirms it was " +
			"recorded. A result for a command already final (timed out, cancelled) is ignored."},
		func(ctx context.Context, in *resultInput) (*struct{}, error) {
			a, ctx, err := s.agent(ctx, in.Authorization, in.AgentID)
			if err != nil {
				return nil, err
			}
			in.Body.CommandID = in.CommandID
			return nil, s.RecordResult(ctx, a, in.Body)
		})
}
