package agent

import (
	"math/rand/v2"
	"time"
)

// backoff spaces retries: each wait doubles up to a cap, and is jittered (between half and
// the whole of the step) so that a fleet that lost its server at the same instant does not
// come back at the same instant.
type backoff struct {
	min, max time.Duration
	step     time.Duration
}

func newBackoff(min, max time.Duration) *backoff { return &backoff{min: min, max: max, step: min} }

// next is the wait before the next try.
func (b *backoff) next() time.Duration {
	d := b.step/2 + rand.N(b.step/2+1)
	b.step = min(b.step*2, b.max)
	return d
}

// reset starts over from the shortest wait, after a success.
func (b *backoff) reset() { b.step = b.min }
