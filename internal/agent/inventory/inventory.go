// Package inventory collects what gale-agent reports about the machine it runs on: the full
// inventory (operating system, hardware, disks, network, installed software, logged-in users)
// and the small health sample sent with every heartbeat.
//
// Collectors are independent: one that fails adds a line to Inventory.Errors and the others
// still report. Platform-specific parts live in files suffixed _linux, _windows, _darwin and
// _other; Linux is the reference platform.
package inventory

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"gale/internal/wire/agentproto"
)

// collectorTimeout bounds each collector, so a hung package manager cannot stall the report.
const collectorTimeout = 2 * time.Minute

// collector fills its own fields of the inventory; distinct collectors never share a field,
// which lets them run concurrently.
type collector struct {
	name string
	run  func(ctx context.Context, inv *agentproto.Inventory) error
}

// Options adjust a collection.
type Options struct {
	// PackageRoot is the system tree whose packages the agent manages (agent.Config's
	// PackageRoot); "" is the machine's own.
	PackageRoot string
}

// collectorsFor returns the collectors of a collection with o.
func collectorsFor(o Options) []collector {
	return []collector{
		{"os", collectOS},
		{"hardware", collectHardware},
		{"disks", collectDisks},
		{"network", collectNetwork},
		{"software", func(ctx context.Context, inv *agentproto.Inventory) error {
			return collectSoftware(ctx, inv, o.PackageRoot)
		}},
		{"users", collectUsers},
	}
}

// Collect takes the full inventory of this machine. It always returns a document: failures
// are listed in Errors, and every list is non-nil so it encodes as [] rather than null.
func Collect(ctx context.Context, o Options) agentproto.Inventory {
	if o.PackageRoot == "" {
		o.PackageRoot = "/"
	}
	return collect(ctx, o, collectorsFor(o))
}

// collect runs the collectors concurrently into one document.
func collect(ctx context.Context, o Options, collectors []collector) agentproto.Inventory {
	inv := agentproto.Inventory{
		CollectedAt: time.Now().UTC(),
		Disks:       []agentproto.Disk{},
		Network:     []agentproto.NetworkInterface{},
		Software:    []agentproto.Software{},
		Users:       []agentproto.LoggedInUser{},
	}
	var problems []string
	hostname, err := os.Hostname()
	if err != nil {
		problems = append(problems, "hostname: "+err.Error())
	}
	inv.Hostname = hostname

	// Each collector reports into its own slot, so Errors keeps the order of collectors.
	failures := make([]error, len(collectors))
	var wg sync.WaitGroup
	for i, c := range collectors {
		wg.Go(func() { failures[i] = runCollector(ctx, c, &inv) })
	}
	wg.Wait()
	for i, err := range failures {
		if err == nil {
			continue
		}
		for _, e := range splitJoined(err) {
			problems = append(problems, collectors[i].name+": "+e.Error())
		}
	}
	// Products are recognized by their packages too, so this runs once the software is in.
	inv.Posture = managementPosture(ctx, inv.Software, o.PackageRoot)
	inv.Errors = problems
	return inv
}

// runCollector runs one collector under its own deadline and turns a panic into an error,
// so a bug in one collector cannot take the agent down with it.
func runCollector(ctx context.Context, c collector, inv *agentproto.Inventory) (err error) {
	ctx, cancel := context.WithTimeout(ctx, collectorTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return c.run(ctx, inv)
}

// splitJoined returns the errors inside an errors.Join, or err alone, so each failure gets
// its own line in Inventory.Errors.
func splitJoined(err error) []error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		return joined.Unwrap()
	}
	return []error{err}
}
