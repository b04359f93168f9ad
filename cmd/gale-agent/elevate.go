package main

import (
	"os"

	"github.com/spf13/cobra"

	"gale/internal/agent/elevate"
)

// elevateCmd asks the local root agent to run a command as root; the organization's PAM
// rules or a technician decide. It exits with the command's status, or 1 when not elevated.
func elevateCmd() *cobra.Command {
	var grant bool
	var socket string
	cmd := &cobra.Command{
		Use:   "elevate [--grant] -- <command> [args...]",
		Short: "Ask to run a command as root",
		Long: "Elevate asks the agent (running as root) to run the command as root. The agent reports who asks and what (the " +
			"executable is resolved with a fixed PATH, or given as an absolute path, and hashed) to the Gale server, whose rules " +
			"decide at once or leave the request to a technician. Approved, the command runs as root on this terminal and " +
			"elevate exits with its status; --grant asks instead for a time-limited sudoers entry for exactly that command. " +
			"Denied, ignored or unanswered within 10 minutes, elevate exits 1.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if socket == "" {
				socket = elevate.SocketPath()
			}
			os.Exit(elevate.Ask(socket, args, grant, cmd.ErrOrStderr()))
			return nil
		},
	}
	cmd.Flags().BoolVar(&grant, "grant", false, "ask for a time-limited sudoers entry instead of one run")
	cmd.Flags().StringVar(&socket, "socket", "", "the agent's elevation socket (default $"+elevate.EnvSocket+" or "+elevate.DefaultSocket+")")
	return cmd
}
