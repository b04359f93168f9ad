// Command gale-agentsim simulates many agents against a Gale server over the real agent
// protocol and reports heartbeat and command-delivery latency. See docs/benchmarks.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"gale/internal/testkit/agentsim"
)

func main() {
	var o agentsim.Options
	flag.StringVar(&o.Server, "server", "http://127.0.0.1:8080", "the server's base address")
	flag.IntVar(&o.Agents, "agents", 1000, "number of simulated agents")
	flag.StringVar(&o.EnrollmentKey, "key", "", "enrollment key for agents not yet in the state file (needs maxUsage ≥ agents)")
	flag.StringVar(&o.EnrollmentSecret, "secret", "", "enrollment secret")
	flag.StringVar(&o.StateFile, "state", "agentsim-state.json", "file keeping enrolled agents' credentials")
	flag.DurationVar(&o.Heartbeat, "heartbeat", 60*time.Second, "heartbeat interval")
	flag.DurationVar(&o.Duration, "duration", 3*time.Minute, "how long to run once started")
	flag.StringVar(&o.AdminToken, "token", "", "an administrator's access token, to time command delivery")
	flag.IntVar(&o.Commands, "commands", 200, "commands to send when -token is given")
	flag.BoolVar(&o.Fleet, "fleet", false, "with -token: run a script on every agent once and time its dispatch and results")
	flag.BoolVar(&o.Scan, "scan", false, "with -fleet: scan every agent for patches instead of running a script")
	flag.Parse()
	o.Progress = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := agentsim.Run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gale-agentsim:", err)
		os.Exit(1)
	}
	fmt.Println(rep)
}
