package e2e

import (
	"flag"
	"os"
	"testing"

	"gale/internal/agent/elevate"
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
	// The agents these tests start never serve privileged access on the host's socket nor
	// look at its sudoers directory; the test of privileged access names its own.
	dir, err := os.MkdirTemp("", "gale-e2e-sudoers-")
	if err != nil {
		panic(err)
	}
	os.Setenv(elevate.EnvSocket, "off")
	os.Setenv(elevate.EnvSudoersDir, dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
