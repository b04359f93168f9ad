package agent

import (
	"time"

	"gale/internal/agentproto"
)

// power schedules a reboot or shutdown and reports at once: once the machine goes down the
// agent cannot report anything. A failure to start the system command is logged by the
// operating system; the device then simply stays online.
func power(kind string, pd agentproto.PowerDelay) agentproto.CommandResult {
	go func() {
		time.Sleep(time.Duration(pd.DelaySeconds)*time.Second + time.Second)
		_ = powerCommand(kind == agentproto.CommandReboot).Run()
	}()
	return agentproto.CommandResult{Status: agentproto.ResultCompleted, Result: []byte(`{"scheduled":true}`)}
}
