package agent

import (
	"testing"
	"time"
)

func TestBackoffDoublesWithJitterUpToItsCap(t *testing.T) {
	b := newBackoff(time.Second, 30*time.Second)
	for i, step := range []time.Duration{1, 2, 4, 8, 16, 30, 30, 30} {
		step *= time.Second
		if d := b.next(); d < step/2 || d > step {
			t.Fatalf("wait %d = %s; want within [%s, %s]", i, d, step/2, step)
		}
	}
	b.reset()
	if d := b.next(); d > time.Second {
		t.Fatalf("after reset the wait is %s; want at most 1s", d)
	}
}

func TestBackoffSpreadsAFleet(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 50 {
		b := newBackoff(time.Second, 30*time.Second)
		seen[b.next()] = true
	}
	if len(seen) < 40 {
		t.Fatalf("50 agents chose only %d distinct waits", len(seen))
	}
}
