package patches

import (
	"fmt"
	"strconv"
	"time"
)

// policyLocation loads an IANA zone; "Local" (the server's own zone) is refused, as it means
// a different time on every node.
func policyLocation(name string) (*time.Location, error) {
	if name == "Local" || name == "" {
		return nil, fmt.Errorf("unknown time zone %q", name)
	}
	return time.LoadLocation(name)
}

// clockTime reads HH:MM.
func clockTime(s string) (hour, minute int, ok bool) {
	if len(s) != 5 || s[2] != ':' {
		return 0, 0, false
	}
	h, err1 := strconv.Atoi(s[:2])
	m, err2 := strconv.Atoi(s[3:])
	if err1 != nil || err2 != nil || h < 0 || h > 23 || m < 0 || m > 59 {
		return 0, 0, false
	}
	return h, m, true
}

// Next is the schedule's first run strictly after t: the first matching day, in the
// schedule's zone, whose time of day is after t. A time of day that a daylight saving change
// skips runs as the zone's clock reads it once moved on (02:30 on the morning clocks jump
// from 02:00 to 03:00 is 03:30); one that repeats runs once, at its first instance.
func (s PatchPolicySchedule) Next(t time.Time) (time.Time, error) {
	loc, err := policyLocation(s.Timezone)
	if err != nil {
		return time.Time{}, err
	}
	hour, minute, ok := clockTime(s.Time)
	if !ok {
		return time.Time{}, fmt.Errorf("bad time of day %q", s.Time)
	}
	local := t.In(loc)
	// Every schedule matches at least one day a month, so 62 days always reach a run.
	for i := range 62 {
		day := time.Date(local.Year(), local.Month(), local.Day()+i, 12, 0, 0, 0, loc)
		if !s.matches(day) {
			continue
		}
		run := time.Date(day.Year(), day.Month(), day.Day(), hour, minute, 0, 0, loc)
		if l := run.In(loc); l.Hour() != hour || l.Minute() != minute {
			// A skipped time: read it with the offset in force before the change.
			_, before := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, loc).Zone()
			run = time.Date(day.Year(), day.Month(), day.Day(), hour, minute, 0, 0, time.UTC).Add(-time.Duration(before) * time.Second)
		}
		if run.After(t) {
			return run.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("the schedule has no run within 62 days")
}

// matches reports whether the schedule runs on day's date.
func (s PatchPolicySchedule) matches(day time.Time) bool {
	switch s.Frequency {
	case PolicyDaily:
		return true
	case PolicyWeekly:
		for _, d := range s.DaysOfWeek {
			if time.Weekday(d) == day.Weekday() {
				return true
			}
		}
	case PolicyMonthly:
		if s.DayOfMonth == -1 {
			return day.AddDate(0, 0, 1).Month() != day.Month()
		}
		return day.Day() == s.DayOfMonth
	}
	return false
}
