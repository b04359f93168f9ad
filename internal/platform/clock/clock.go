// Package clock is the time the server's rules run on. Everything scheduled or expiring
// (rate-limit windows, key expiry, quiet hours, escalations, cron triggers, maintenance
// windows) asks a Clock rather than the time package, so tests move time instead of sleeping.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time: UTC, to the microsecond (what both databases store).
type Clock interface {
	Now() time.Time
}

// System is the real clock.
type System struct{}

// Now is the current time.
func (System) Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// Or returns c, or the system clock when c is nil.
func Or(c Clock) Clock {
	if c == nil {
		return System{}
	}
	return c
}

// Fake is a clock that tests move: it runs at the system clock's pace from where Set or
// Advance put it, so code that waits on real timers still sees time pass. It is safe for
// concurrent use; a zero Fake tells the system time.
type Fake struct {
	mu     sync.Mutex
	offset time.Duration
}

// NewFake returns a clock that tells t now.
func NewFake(t time.Time) *Fake {
	f := &Fake{}
	f.Set(t)
	return f
}

// Now is the clock's time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Now().Add(f.offset).UTC().Truncate(time.Microsecond)
}

// Set moves the clock so that it tells t now.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offset = time.Until(t)
}

// Advance moves the clock forward by d.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offset += d
}
