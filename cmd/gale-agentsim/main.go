// Command gale-agentsim simulates many agents against a Gale server over the real agent
// protocol and reports heartbeat and command-delivery latency, optionally beside a load of
// API requests. With -seed-devices it instead writes a fleet of devices straight into a
// database, before a server starts on it. Linux only. See docs/benchmarks.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"gale/internal/platform/store"
	"gale/internal/testkit/agentsim"
	"gale/internal/testkit/seed"
)

func main() {
	var o agentsim.Options
	flag.StringVar(&o.Server, "server", "http://127.0.0.1:8080", "the server's base address")
	flag.IntVar(&o.Agents, "agents", 1000, "number of simulated agents")
	flag.StringVar(&o.EnrollmentKey, "key", "", "enrollment key for agents not yet in the state file (needs maxUsage ≥ agents)")
	flag.StringVar(&o.EnrollmentSecret, "secret", "", "enrollment secret")
	flag.StringVar(&o.StateFile, "state", "agentsim-state.json", "file keeping enrolled agents' credentials")
	flag.DurationVar(&o.Heartbeat, "heartbeat", 60*time.Second, "heartbeat interval")
	flag.DurationVar(&o.Duration, "duration", 3*time.Minute, "how long to run once started (with -list-clients: each phase)")
	flag.DurationVar(&o.Grace, "grace", 5*time.Second, "how long to wait for the last heartbeats' acknowledgements at the end")
	flag.StringVar(&o.AdminToken, "token", "", "an administrator's access token, to time command delivery and to list")
	flag.IntVar(&o.Commands, "commands", 200, "commands to send when -token is given")
	flag.BoolVar(&o.Fleet, "fleet", false, "with -token: run a script on every agent once and time its dispatch and results")
	flag.BoolVar(&o.Scan, "scan", false, "with -fleet: scan every agent for patches instead of running a script")
	flag.IntVar(&o.ListClients, "list-clients", 0, "with -token: clients sending -list-path, alone and then beside the agents")
	flag.StringVar(&o.ListPath, "list-path", "/api/v1/devices?limit=50", "the request of the list clients")
	flag.BoolVar(&o.SpreadSources, "spread-sources", false, "bind each agent's connection to its own address of 127.0.0.0/8")
	seedDevices := flag.Int("seed-devices", 0, "instead of simulating: write this many devices of a new partner into -database-url and exit")
	seedAgents := flag.Int("seed-agents", 0, "with -seed-devices: also this many enrolled agents of the partner, their credentials in -state")
	databaseURL := flag.String("database-url", os.Getenv("DATABASE_URL"), "with -seed-devices: the database (DATABASE_URL)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *seedDevices > 0 {
		partnerID, err := seedFleet(ctx, *databaseURL, *seedDevices, *seedAgents, o.StateFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gale-agentsim:", err)
			os.Exit(1)
		}
		fmt.Println(partnerID)
		return
	}
	raiseFileLimit(o.Agents + o.ListClients + 100)
	o.Progress = os.Stderr
	rep, err := agentsim.Run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gale-agentsim:", err)
		os.Exit(1)
	}
	fmt.Println(rep)
}

// seedFleet brings the database's schema up to date and writes a partner with devices
// devices into it, offline as devices whose agents are not running, and agents enrolled
// agents whose credentials it writes into the state file; it returns the partner's ID.
func seedFleet(ctx context.Context, url string, devices, agents int, stateFile string) (string, error) {
	db, err := store.Open(ctx, url)
	if err != nil {
		return "", err
	}
	defer db.Close()
	if err := db.Migrate(ctx, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))); err != nil {
		return "", err
	}
	partnerID, err := seed.Partner(ctx, db, "Seeded MSP")
	if err != nil {
		return "", err
	}
	if err := seed.Devices(ctx, db, partnerID, devices, "offline"); err != nil {
		return "", err
	}
	if agents > 0 {
		seeded, err := seed.Agents(ctx, db, partnerID, agents)
		if err != nil {
			return "", err
		}
		creds := make([]agentsim.Creds, len(seeded))
		for i, a := range seeded {
			creds[i] = agentsim.Creds{DeviceID: a.DeviceID, Token: a.Token}
		}
		b, _ := json.Marshal(creds)
		if err := os.WriteFile(stateFile, b, 0o600); err != nil {
			return "", err
		}
	}
	return partnerID, seed.Settle(ctx, db)
}

// raiseFileLimit makes room for files open at once (a connection each). Go lifts the soft
// limit to the hard one at start; as root, lift the hard one too where it is lower.
func raiseFileLimit(files int) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil || l.Cur >= uint64(files) {
		return
	}
	want := syscall.Rlimit{Cur: max(l.Max, uint64(files)), Max: max(l.Max, uint64(files))}
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want) != nil {
		want = syscall.Rlimit{Cur: l.Max, Max: l.Max}
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want)
	}
	if want.Cur < uint64(files) {
		fmt.Fprintf(os.Stderr, "gale-agentsim: %d files may be open at once, fewer than the %d connections to hold\n", want.Cur, files)
	}
}
