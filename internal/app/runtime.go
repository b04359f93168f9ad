package app

import (
	"os"
	"runtime/debug"
)

// DefaultGCPercent is the garbage collector target the server runs with unless GOGC is set.
// The server's live heap is small (tens of MiB) while each list response allocates tens of
// KiB, so collecting at 4x the live heap instead of 2x costs little memory and, measured with
// scripts/loadtest.sh, gives about 40% more requests per second and half the p99 latency.
const DefaultGCPercent = 400

// TuneRuntime applies DefaultGCPercent when the operator has not set GOGC.
func TuneRuntime() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(DefaultGCPercent)
	}
}
