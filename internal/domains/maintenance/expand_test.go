package maintenance

import (
	"testing"
	"time"

	"gale/internal/platform/apperr"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestExpansion(t *testing.T) {
	until := utc("2026-01-03T12:00:00Z")
	tests := []struct {
		name       string
		def        definition
		from, to   string
		wantStarts []string
		// wantLength is every occurrence's length; 0 skips the check.
		wantLength time.Duration
		wantDone   bool
	}{
		{name: "Berlin spring forward: 02:30 does not exist on 29 March, the window starts at the change (03:00 CEST)",
			def:  definition{StartTime: "2026-03-27T02:30:00", EndTime: "2026-03-27T03:30:00", Timezone: "Europe/Berlin", Recurrence: Daily},
			from: "2026-03-26T00:00:00Z", to: "2026-03-31T00:00:00Z",
			wantStarts: []string{"2026-03-27T01:30:00Z", "2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"},
			wantLength: time.Hour},
		{name: "Berlin fall back: 02:30 happens twice on 25 October, the first (CEST) is taken",
			def:  definition{StartTime: "2026-10-24T02:30:00+02:00", EndTime: "2026-10-24T03:30:00+02:00", Timezone: "Europe/Berlin", Recurrence: Daily},
			from: "2026-10-23T00:00:00Z", to: "2026-10-27T00:00:00Z",
			wantStarts: []string{"2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}, wantLength: time.Hour},
		{name: "New York spring forward: 02:30 moves to 03:00 EDT on 8 March",
			def:  definition{StartTime: "2026-03-07T02:30:00Z", EndTime: "2026-03-07T04:30:00Z", Timezone: "America/New_York", Recurrence: Daily},
			from: "2026-03-06T00:00:00Z", to: "2026-03-10T00:00:00Z",
			wantStarts: []string{"2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}, wantLength: 2 * time.Hour},
		{name: "New York fall back: 02:30 is after the repeated hour, it stays 02:30 EST",
			def:  definition{StartTime: "2026-10-31T02:30:00", EndTime: "2026-10-31T03:00:00", Timezone: "America/New_York", Recurrence: Daily},
			from: "2026-10-30T00:00:00Z", to: "2026-11-03T00:00:00Z",
			wantStarts: []string{"2026-10-31T06:30:00Z", "2026-11-01T07:30:00Z", "2026-11-02T07:30:00Z"}, wantLength: 30 * time.Minute},
		{name: "New York fall back: 01:30 happens twice on 1 November, the first (EDT) is taken",
			def:  definition{StartTime: "2026-10-31T01:30:00", EndTime: "2026-10-31T02:00:00", Timezone: "America/New_York", Recurrence: Daily},
			from: "2026-10-30T00:00:00Z", to: "2026-11-03T00:00:00Z",
			wantStarts: []string{"2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}, wantLength: 30 * time.Minute},
		{name: "weekly across the Berlin change keeps 02:30 local",
			def:  definition{StartTime: "2026-03-15T02:30:00", EndTime: "2026-03-15T04:00:00", Timezone: "Europe/Berlin", Recurrence: Weekly},
			from: "2026-03-01T00:00:00Z", to: "2026-04-06T00:00:00Z",
			wantStarts: []string{"2026-03-15T01:30:00Z", "2026-03-22T01:30:00Z", "2026-03-29T01:00:00Z", "2026-04-05T00:30:00Z"}},
		{name: "monthly on the 31st skips the months without one",
			def:  definition{StartTime: "2026-01-31T22:00:00", EndTime: "2026-01-31T23:00:00", Timezone: "UTC", Recurrence: Monthly},
			from: "2026-01-01T00:00:00Z", to: "2026-08-01T00:00:00Z",
			wantStarts: []string{"2026-01-31T22:00:00Z", "2026-03-31T22:00:00Z", "2026-05-31T22:00:00Z", "2026-07-31T22:00:00Z"}},
		{name: "monthly on the 29th skips February of a non-leap year",
			def:  definition{StartTime: "2026-01-29T10:00:00", EndTime: "2026-01-29T11:00:00", Timezone: "UTC", Recurrence: Monthly},
			from: "2026-01-01T00:00:00Z", to: "2026-04-30T00:00:00Z",
			wantStarts: []string{"2026-01-29T10:00:00Z", "2026-03-29T10:00:00Z", "2026-04-29T10:00:00Z"}},
		{name: "monthly on the 29th keeps February of a leap year",
			def:  definition{StartTime: "2028-01-29T10:00:00", EndTime: "2028-01-29T11:00:00", Timezone: "UTC", Recurrence: Monthly},
			from: "2028-01-01T00:00:00Z", to: "2028-03-30T00:00:00Z",
			wantStarts: []string{"2028-01-29T10:00:00Z", "2028-02-29T10:00:00Z", "2028-03-29T10:00:00Z"}},
		{name: "custom RRULE: every other Saturday",
			def: definition{StartTime: "2026-01-03T09:00:00", EndTime: "2026-01-03T12:00:00", Timezone: "Europe/Berlin", Recurrence: Custom,
				RRule: "FREQ=WEEKLY;BYDAY=SA;INTERVAL=2"},
			from: "2026-01-01T00:00:00Z", to: "2026-02-01T00:00:00Z",
			wantStarts: []string{"2026-01-03T08:00:00Z", "2026-01-17T08:00:00Z", "2026-01-31T08:00:00Z"}, wantLength: 3 * time.Hour},
		{name: "custom RRULE with COUNT ends (any case)",
			def: definition{StartTime: "2026-01-05T09:00:00", EndTime: "2026-01-05T10:00:00", Timezone: "UTC", Recurrence: Custom,
				RRule: "rrule:freq=monthly;byday=1mo;count=3"},
			from: "2026-01-01T00:00:00Z", to: "2027-01-01T00:00:00Z",
			wantStarts: []string{"2026-01-05T09:00:00Z", "2026-02-02T09:00:00Z", "2026-03-02T09:00:00Z"}, wantDone: true},
		{name: "recurrenceEnd: no occurrence starts after it",
			def: definition{StartTime: "2026-01-01T09:00:00", EndTime: "2026-01-01T10:00:00", Timezone: "UTC", Recurrence: Daily,
				RecurrenceEnd: &until},
			from: "2026-01-01T00:00:00Z", to: "2026-02-01T00:00:00Z",
			wantStarts: []string{"2026-01-01T09:00:00Z", "2026-01-02T09:00:00Z", "2026-01-03T09:00:00Z"}, wantDone: true},
		{name: "once",
			def:  definition{StartTime: "2026-06-01T22:00:00", EndTime: "2026-06-02T02:00:00", Timezone: "Europe/Berlin", Recurrence: Once},
			from: "2026-01-01T00:00:00Z", to: "2027-01-01T00:00:00Z", wantStarts: []string{"2026-06-01T20:00:00Z"},
			wantLength: 4 * time.Hour, wantDone: true},
		{name: "an occurrence under way at from is included, one ended before it is not",
			def:  definition{StartTime: "2026-01-01T09:00:00", EndTime: "2026-01-01T10:00:00", Timezone: "UTC", Recurrence: Daily},
			from: "2026-01-02T09:30:00Z", to: "2026-01-03T09:00:00Z", wantStarts: []string{"2026-01-02T09:00:00Z"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.def
			d.Name, d.Targets = "w", MaintenanceTargets{Type: TargetAll}
			sched, err := compile(&d, true)
			if err != nil {
				t.Fatal(err)
			}
			x := sched.between(utc(tc.from), utc(tc.to), 0)
			var got []string
			for _, sp := range x.spans {
				got = append(got, sp.start.Format(time.RFC3339))
				if tc.wantLength > 0 && sp.end.Sub(sp.start) != tc.wantLength {
					t.Errorf("occurrence at %s lasts %s, want %s", sp.start, sp.end.Sub(sp.start), tc.wantLength)
				}
			}
			if len(got) != len(tc.wantStarts) {
				t.Fatalf("starts %v, want %v", got, tc.wantStarts)
			}
			for i := range got {
				if got[i] != tc.wantStarts[i] {
					t.Fatalf("starts %v, want %v", got, tc.wantStarts)
				}
			}
			if x.done != tc.wantDone {
				t.Fatalf("done %v, want %v", x.done, tc.wantDone)
			}
		})
	}
}

func TestResolveIsTheWallClockOutsideChanges(t *testing.T) {
	loc, _ := time.LoadLocation("Asia/Tokyo")
	got := resolve(time.Date(2026, 7, 1, 9, 0, 0, 0, time.UTC), loc)
	if !got.Equal(utc("2026-07-01T00:00:00Z")) {
		t.Fatalf("09:00 in Tokyo = %s", got)
	}
}

func TestCompileRefuses(t *testing.T) {
	early := utc("2025-12-01T00:00:00Z")
	base := definition{Name: "w", StartTime: "2026-01-01T09:00:00", EndTime: "2026-01-01T10:00:00", Timezone: "UTC", Recurrence: Daily,
		Targets: MaintenanceTargets{Type: TargetAll}}
	tests := []struct {
		name  string
		edit  func(d *definition)
		field string
	}{
		{"unknown time zone", func(d *definition) { d.Timezone = "Mars/Olympus" }, "timezone"},
		{"the host's zone", func(d *definition) { d.Timezone = "Local" }, "timezone"},
		{"not a date-time", func(d *definition) { d.StartTime = "tomorrow" }, "startTime"},
		{"29 February of a non-leap year", func(d *definition) { d.StartTime = "2026-02-29T09:00:00" }, "startTime"},
		{"end before start", func(d *definition) { d.EndTime = "2026-01-01T08:00:00" }, "endTime"},
		{"end equal to start", func(d *definition) { d.EndTime = d.StartTime }, "endTime"},
		{"longer than 31 days", func(d *definition) { d.Recurrence, d.EndTime = Once, "2026-02-02T09:00:00" }, "endTime"},
		{"within a daylight-saving gap", func(d *definition) {
			d.Timezone, d.StartTime, d.EndTime = "Europe/Berlin", "2026-03-29T02:10:00", "2026-03-29T02:50:00"
		}, "endTime"},
		{"overlapping occurrences", func(d *definition) { d.EndTime = "2026-01-02T10:00:00" }, "endTime"},
		{"a bad RRULE", func(d *definition) { d.Recurrence, d.RRule = Custom, "FREQ=SOMETIMES" }, "rrule"},
		{"an RRULE with an unknown part", func(d *definition) { d.Recurrence, d.RRule = Custom, "FREQ=DAILY;COLOR=RED" }, "rrule"},
		{"an RRULE with UNTIL", func(d *definition) { d.Recurrence, d.RRule = Custom, "FREQ=DAILY;UNTIL=20261231T000000Z" }, "rrule"},
		{"an hourly RRULE", func(d *definition) { d.Recurrence, d.RRule = Custom, "FREQ=HOURLY" }, "rrule"},
		{"an RRULE with BYHOUR", func(d *definition) { d.Recurrence, d.RRule = Custom, "FREQ=DAILY;BYHOUR=1,2" }, "rrule"},
		{"a custom recurrence without rule", func(d *definition) { d.Recurrence = Custom }, "rrule"},
		{"a rule without custom recurrence", func(d *definition) { d.RRule = "FREQ=DAILY" }, "rrule"},
		{"an unknown recurrence", func(d *definition) { d.Recurrence = "yearly" }, "recurrence"},
		{"recurrenceEnd before the first occurrence", func(d *definition) { d.RecurrenceEnd = &early }, "recurrenceEnd"},
		{"recurrenceEnd of a window that happens once", func(d *definition) { d.Recurrence, d.RecurrenceEnd = Once, &early }, "recurrenceEnd"},
		{"IDs of an all window", func(d *definition) { d.Targets = MaintenanceTargets{Type: TargetAll, IDs: []string{"x"}} }, "targets.ids"},
		{"no IDs of a sites window", func(d *definition) { d.Targets = MaintenanceTargets{Type: TargetSites} }, "targets.ids"},
		{"a malformed ID", func(d *definition) { d.Targets = MaintenanceTargets{Type: TargetDevices, IDs: []string{"nope"}} }, "targets.ids[0]"},
		{"an unknown target type", func(d *definition) { d.Targets = MaintenanceTargets{Type: "racks"} }, "targets.type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := base
			tc.edit(&d)
			_, err := compile(&d, true)
			e, ok := apperr.As(err)
			if !ok || e.Code != apperr.CodeValidation {
				t.Fatalf("err %v, want a validation error", err)
			}
			for _, det := range e.Details {
				if det.Field == tc.field {
					return
				}
			}
			t.Fatalf("details %+v, want one about %s", e.Details, tc.field)
		})
	}
}
