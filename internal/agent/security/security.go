package security

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"

	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
)

// Register adds security_status, security_scan and threat_action.
func (c *Collector) Register(reg *capability.Registry) {
	reg.Command(agentproto.CommandSecurityStatus, c.command(func(ctx context.Context, _ agentproto.Command) (any, error) {
		return c.Status(ctx), nil
	}))
	reg.Command(agentproto.CommandSecurityScan, c.command(func(ctx context.Context, cmd agentproto.Command) (any, error) {
		var p agentproto.SecurityScan
		if err := json.Unmarshal(cmd.Payload, &p); err != nil {
			return nil, fmt.Errorf("the payload is unreadable: %v", err)
		}
		return c.Scan(ctx, p, func(files int) {
			reg.Send(agentproto.TypeSecurityScanProgress, agentproto.SecurityScanProgress{CommandID: cmd.ID, FilesScanned: files})
		})
	}))
	reg.Command(agentproto.CommandThreatAction, c.command(func(_ context.Context, cmd agentproto.Command) (any, error) {
		var p agentproto.ThreatAction
		if err := json.Unmarshal(cmd.Payload, &p); err != nil {
			return nil, fmt.Errorf("the payload is unreadable: %v", err)
		}
		return c.Act(p)
	}))
}

// command runs a Linux-only handler and reports its result.
func (c *Collector) command(fn func(ctx context.Context, cmd agentproto.Command) (any, error)) capability.CommandHandler {
	return func(ctx context.Context, cmd agentproto.Command) agentproto.CommandResult {
		if runtime.GOOS != "linux" {
			return agentproto.CommandResult{Status: agentproto.ResultFailed, Error: "security collection is available on Linux only"}
		}
		return capability.Outcome(fn(ctx, cmd))
	}
}
