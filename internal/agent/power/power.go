// Package power is the agent's reboot and shutdown commands.
package power

import (
	"context"
	"encoding/json"
	"time"

	"gale/internal/agent/capability"
	"gale/internal/agentproto"
)

// Register registers the reboot and shutdown commands with reg.
func Register(reg *capability.Registry) {
	for _, kind := range []string{agentproto.CommandReboot, agentproto.CommandShutdown} {
		reg.Command(kind, func(_ context.Context, c agentproto.Command) agentproto.CommandResult {
			var pd agentproto.PowerDelay
			_ = json.Unmarshal(c.Payload, &pd)
			return schedule(kind == agentproto.CommandReboot, pd)
		})
	}
}

// schedule schedules a reboot or shutdown and reports at once: once the machine goes down the
// agent cannot report anything. A failure to start the system command is logged by the
// operating system; the device then simply stays online.
func schedule(reboot bool, pd agentproto.PowerDelay) agentproto.CommandResult {
	go func() {
		time.Sleep(time.Duration(pd.DelaySeconds)*time.Second + time.Second)
		_ = command(reboot).Run()
	}()
	return agentproto.CommandResult{Status: agentproto.ResultCompleted, Result: []byte(`{"scheduled":true}`)}
}
