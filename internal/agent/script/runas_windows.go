package script

import (
	"context"
	"errors"
	"os/exec"

	"gale/internal/wire/agentproto"
)

// runAs refuses to run as the logged-in user: this agent cannot start a process in another
// user's Windows session yet. System and elevated run as the agent's service account.
func runAs(_ context.Context, _ *exec.Cmd, runAs, _, _ string) error {
	if runAs == agentproto.RunAsUser {
		return errors.New("running a script as the logged-in user is not supported on Windows by this agent; run it as system")
	}
	return nil
}
