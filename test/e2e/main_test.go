package e2e

import (
	"flag"
	"os"
	"testing"
)

// TestMain lets four tests run at once unless -parallel says otherwise: the tests that call
// t.Parallel spend their time waiting on servers and agents (outages, restarts, heartbeats),
// not on the processor, so the default of one per core leaves the machine idle.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "4")
	}
	os.Exit(m.Run())
}
