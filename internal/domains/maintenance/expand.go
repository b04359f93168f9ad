package maintenance

import (
	"strings"
	"time"

	"github.com/teambition/rrule-go"
)

// wallLayout is how a wall-clock time is stored and shown: a local date-time without offset.
const wallLayout = "2006-01-02T15:04:05"

// parseWall reads a date-time as a wall clock: RFC 3339, whose offset is ignored (the window's
// timezone places it), or the same without offset. The result carries the wall-clock fields
// in UTC, a "floating" time.
func parseWall(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC), true
	}
	if t, err := time.Parse(wallLayout, s); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// resolve returns the instant the wall clock w (floating) names in loc. A wall clock that does
// not exist there (the hour a spring-forward skips) moves to the first instant after the gap,
// the change itself; one that exists twice (the hour a fall-back repeats) takes the first.
func resolve(w time.Time, loc *time.Location) time.Time {
	before, after := offsetAt(w.Add(-24*time.Hour), loc), offsetAt(w.Add(24*time.Hour), loc)
	var best time.Time
	for _, off := range []int{before, after} {
		c := w.Add(-time.Duration(off) * time.Second)
		if offsetAt(c, loc) == off && (best.IsZero() || c.Before(best)) {
			best = c
		}
	}
	if !best.IsZero() {
		return best
	}
	// In the gap: read with the offset before it, w lands in the zone after the change, whose
	// start is the change.
	start, _ := w.Add(-time.Duration(before) * time.Second).In(loc).ZoneBounds()
	return start.UTC()
}

func offsetAt(t time.Time, loc *time.Location) int {
	_, off := t.In(loc).Zone()
	return off
}

// schedule is a window's recurrence made ready to produce occurrences.
type schedule struct {
	loc   *time.Location
	first time.Time // the first occurrence's start, floating
	// length is the first occurrence's duration; every occurrence keeps it.
	length time.Duration
	// rule is nil for a window that happens once; its DTSTART is first.
	rule *rrule.RRule
	// until is recurrenceEnd: no occurrence starts after it.
	until *time.Time
}

// span is one occurrence's time, in UTC.
type span struct{ start, end time.Time }

// expansion is what one pass over a schedule found.
type expansion struct {
	spans []span
	// done: the recurrence has no occurrence starting at or after the pass's end.
	done bool
	// overlapped: an occurrence would have begun before the previous one ended (it is left out).
	overlapped bool
}

// between returns the occurrences that end after from and start before to, in order. At most
// limit are produced (0: no limit) counting from the first.
func (s schedule) between(from, to time.Time, limit int) expansion {
	var out expansion
	next := s.floating()
	var prevEnd time.Time
	count := 0
	for {
		f, ok := next()
		if !ok {
			out.done = true
			return out
		}
		start := resolve(f, s.loc)
		if s.until != nil && start.After(*s.until) {
			out.done = true
			return out
		}
		if !start.Before(to) {
			return out
		}
		if start.Before(prevEnd) {
			out.overlapped = true
			continue
		}
		end := start.Add(s.length)
		prevEnd = end
		count++
		if end.After(from) {
			out.spans = append(out.spans, span{start.UTC(), end.UTC()})
		}
		if limit > 0 && count >= limit {
			return out
		}
	}
}

// over reports whether no occurrence ends after now (the recurrence ended before it).
func (s schedule) over(now time.Time) bool {
	x := s.between(now, now.Add(checkSpan), 0)
	return len(x.spans) == 0 && x.done
}

// floating returns an iterator over the wall-clock starts: the first occurrence, then the
// rule's occurrences after it.
func (s schedule) floating() func() (time.Time, bool) {
	firstDone := false
	var it rrule.Next
	if s.rule != nil {
		it = s.rule.Iterator()
	}
	return func() (time.Time, bool) {
		if !firstDone {
			firstDone = true
			return s.first, true
		}
		if it == nil {
			return time.Time{}, false
		}
		for {
			t, ok := it()
			if !ok {
				return time.Time{}, false
			}
			if t.After(s.first) {
				return t, true
			}
		}
	}
}
