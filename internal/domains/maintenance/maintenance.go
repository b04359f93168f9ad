// Package maintenance keeps maintenance windows: recurring periods in an organization's time
// zone during which alerts, patches, automations or scripts are held back from the devices a
// window targets. A window's occurrences are written 90 days ahead; a periodic job moves them
// from scheduled to active to completed, and other domains ask Held whether devices are in an
// active occurrence now.
package maintenance

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/platform/apperr"

	"github.com/teambition/rrule-go"
)

// Suppression is what a window holds back.
type Suppression string

// What windows suppress.
const (
	Alerts      Suppression = "alerts"
	Patches     Suppression = "patches"
	Automations Suppression = "automations"
	Scripts     Suppression = "scripts"
)

// column is the window's flag column of a suppression.
func (w Suppression) column() (string, bool) {
	switch w {
	case Alerts:
		return "w.suppress_alerts", true
	case Patches:
		return "w.suppress_patches", true
	case Automations:
		return "w.suppress_automations", true
	case Scripts:
		return "w.suppress_scripts", true
	}
	return "", false
}

// Recurrences.
const (
	Once    = "once"
	Daily   = "daily"
	Weekly  = "weekly"
	Monthly = "monthly"
	Custom  = "custom"
)

// Target types.
const (
	TargetAll     = "all"
	TargetSites   = "sites"
	TargetGroups  = "groups"
	TargetDevices = "devices"
)

// Window statuses.
const (
	WindowActive    = "active"
	WindowCancelled = "cancelled"
)

// Occurrence statuses.
const (
	Scheduled = "scheduled"
	Active    = "active"
	Completed = "completed"
	Cancelled = "cancelled"
)

// Events recorded when an occurrence goes active and when it ends.
const (
	EventStarted = "maintenance.started"
	EventEnded   = "maintenance.ended"
)

// Error codes.
const (
	CodeWindowCancelled      = "WINDOW_CANCELLED"
	CodeWindowActive         = "WINDOW_ACTIVE"
	CodeOccurrenceNotPlanned = "OCCURRENCE_NOT_SCHEDULED"
	CodeOccurrenceNotActive  = "OCCURRENCE_NOT_ACTIVE"
)

// Limits.
const (
	// Horizon is how far ahead occurrences are written.
	Horizon = 90 * 24 * time.Hour
	// slack is written past the horizon, so a window is expanded again about once a day
	// rather than at every run of the job.
	slack = 24 * time.Hour
	// MaxDuration bounds one occurrence.
	MaxDuration = 31 * 24 * time.Hour
	// Retention is how long completed and cancelled occurrences are kept after their end.
	Retention = 365 * 24 * time.Hour
	// checkSpan is how far ahead a new or changed recurrence is checked for overlapping
	// occurrences.
	checkSpan = 366 * 24 * time.Hour
)

// MaintenanceTargets are the devices a window covers: all devices of its organization, or those of some
// sites or groups, or some devices.
type MaintenanceTargets struct {
	Type string   `json:"type" enum:"all,sites,groups,devices"`
	IDs  []string `json:"ids" required:"false" maxItems:"500" doc:"The sites, groups or devices of the window's organization; empty for all."`
}

// MaintenanceWindow is the API view of a maintenance window.
type MaintenanceWindow struct {
	ID          string `json:"id" format:"uuid"`
	PartnerID   string `json:"partnerId" format:"uuid"`
	OrgID       string `json:"orgId" format:"uuid"`
	Name        string `json:"name"`
	Description string `json:"description"`
	StartTime   string `json:"startTime" doc:"The first occurrence's start: a wall-clock time in timezone (YYYY-MM-DDTHH:MM:SS)."`
	EndTime     string `json:"endTime" doc:"The first occurrence's end, a wall-clock time in timezone."`
	Timezone    string `json:"timezone"`
	Recurrence  string `json:"recurrence" enum:"once,daily,weekly,monthly,custom"`
	// RRule is the rule of a custom recurrence.
	RRule               *string            `json:"rrule"`
	RecurrenceEnd       *time.Time         `json:"recurrenceEnd"`
	Targets             MaintenanceTargets `json:"targets"`
	SuppressAlerts      bool               `json:"suppressAlerts"`
	SuppressPatches     bool               `json:"suppressPatches"`
	SuppressAutomations bool               `json:"suppressAutomations"`
	SuppressScripts     bool               `json:"suppressScripts"`
	Status              string             `json:"status" enum:"active,cancelled"`
	CreatedBy           *string            `json:"createdBy"`
	CreatedAt           time.Time          `json:"createdAt"`
	UpdatedAt           time.Time          `json:"updatedAt"`
	CancelledAt         *time.Time         `json:"cancelledAt"`
	CancelledBy         *string            `json:"cancelledBy"`
}

// MaintenanceWindowInput is the body of a create.
type MaintenanceWindowInput struct {
	OrgID       string `json:"orgId,omitempty" format:"uuid" doc:"The organization; an organization caller's own when omitted."`
	Name        string `json:"name" minLength:"1" maxLength:"255"`
	Description string `json:"description,omitempty" maxLength:"4000" multiline:"true"`
	StartTime   string `json:"startTime" maxLength:"40" doc:"The first occurrence's start, read as a wall clock in timezone: RFC 3339 (its offset is ignored) or YYYY-MM-DDTHH:MM:SS."`
	EndTime     string `json:"endTime" maxLength:"40" doc:"The first occurrence's end, as startTime; after it, at most 31 days later."`
	Timezone    string `json:"timezone" maxLength:"64" doc:"An IANA time zone, such as Europe/Berlin."`
	Recurrence  string `json:"recurrence" enum:"once,daily,weekly,monthly,custom"`
	RRule       string `json:"rrule,omitempty" maxLength:"500" doc:"custom: an RFC 5545 RRULE, such as FREQ=WEEKLY;BYDAY=SA;INTERVAL=2 (daily or longer frequencies; no DTSTART, UNTIL, BYHOUR, BYMINUTE or BYSECOND)."`
	// RecurrenceEnd: no occurrence starts after it.
	RecurrenceEnd       *time.Time         `json:"recurrenceEnd,omitempty" doc:"No occurrence starts after this instant."`
	Targets             MaintenanceTargets `json:"targets"`
	SuppressAlerts      *bool              `json:"suppressAlerts,omitempty" doc:"Default true."`
	SuppressPatches     *bool              `json:"suppressPatches,omitempty" doc:"Default false."`
	SuppressAutomations *bool              `json:"suppressAutomations,omitempty" doc:"Default false."`
	SuppressScripts     *bool              `json:"suppressScripts,omitempty" doc:"Default false."`
}

// MaintenanceWindowUpdate is the body of a PATCH: absent fields stay.
type MaintenanceWindowUpdate struct {
	Name                *string             `json:"name,omitempty" minLength:"1" maxLength:"255"`
	Description         *string             `json:"description,omitempty" maxLength:"4000" multiline:"true"`
	StartTime           *string             `json:"startTime,omitempty" maxLength:"40"`
	EndTime             *string             `json:"endTime,omitempty" maxLength:"40"`
	Timezone            *string             `json:"timezone,omitempty" maxLength:"64"`
	Recurrence          *string             `json:"recurrence,omitempty" enum:"once,daily,weekly,monthly,custom"`
	RRule               *string             `json:"rrule,omitempty" maxLength:"500"`
	RecurrenceEnd       *time.Time          `json:"recurrenceEnd,omitempty"`
	Targets             *MaintenanceTargets `json:"targets,omitempty"`
	SuppressAlerts      *bool               `json:"suppressAlerts,omitempty"`
	SuppressPatches     *bool               `json:"suppressPatches,omitempty"`
	SuppressAutomations *bool               `json:"suppressAutomations,omitempty"`
	SuppressScripts     *bool               `json:"suppressScripts,omitempty"`
}

// MaintenanceOccurrence is one period of a window.
type MaintenanceOccurrence struct {
	ID        string     `json:"id" format:"uuid"`
	WindowID  string     `json:"windowId" format:"uuid"`
	PartnerID string     `json:"partnerId" format:"uuid"`
	OrgID     string     `json:"orgId" format:"uuid"`
	StartsAt  time.Time  `json:"startsAt"`
	EndsAt    time.Time  `json:"endsAt"`
	Status    string     `json:"status" enum:"scheduled,active,completed,cancelled"`
	StartedAt *time.Time `json:"startedAt" doc:"When it went active: by the job, or by a manual start."`
	EndedAt   *time.Time `json:"endedAt" doc:"When it completed or, never having been active, was closed."`
	StartedBy *string    `json:"startedBy" doc:"Who started it by hand; null when the job did."`
	EndedBy   *string    `json:"endedBy" doc:"Who ended it by hand; null when the job did."`
}

// MaintenanceActive is a window in effect now, with its active occurrence.
type MaintenanceActive struct {
	Window     MaintenanceWindow     `json:"window"`
	Occurrence MaintenanceOccurrence `json:"occurrence"`
}

// checker collects validation failures.
type checker struct{ details []apperr.Detail }

func (c *checker) fail(field, format string, args ...any) {
	c.details = append(c.details, apperr.Detail{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (c *checker) err() error {
	if len(c.details) == 0 {
		return nil
	}
	return apperr.InvalidFields(c.details)
}

// definition is what decides a window's occurrences and coverage, validated.
type definition struct {
	Name, Description, StartTime, EndTime, Timezone, Recurrence string
	RRule                                                       string
	RecurrenceEnd                                               *time.Time
	Targets                                                     MaintenanceTargets
}

// compile validates a definition's fields (all but the target IDs' owners) and returns its
// schedule. check also refuses a recurrence whose occurrences overlap within a year, for
// definitions a caller sends.
func compile(d *definition, check bool) (schedule, error) {
	var c checker
	d.Name = strings.TrimSpace(d.Name)
	if d.Name == "" || len(d.Name) > 255 {
		c.fail("name", "1 to 255 characters")
	}
	if len(d.Description) > 4000 {
		c.fail("description", "at most 4000 characters")
	}
	loc, err := time.LoadLocation(d.Timezone)
	if d.Timezone == "" || d.Timezone == "Local" || err != nil {
		c.fail("timezone", "an IANA time zone, such as Europe/Berlin")
		loc = nil
	}
	start, okStart := parseWall(d.StartTime)
	if !okStart {
		c.fail("startTime", "an RFC 3339 date-time, or YYYY-MM-DDTHH:MM:SS")
	}
	end, okEnd := parseWall(d.EndTime)
	if !okEnd {
		c.fail("endTime", "an RFC 3339 date-time, or YYYY-MM-DDTHH:MM:SS")
	}
	sched := schedule{loc: loc, first: start}
	if okStart && okEnd {
		d.StartTime, d.EndTime = start.Format(wallLayout), end.Format(wallLayout)
		if !end.After(start) {
			c.fail("endTime", "after startTime")
		} else if loc != nil {
			sched.length = resolve(end, loc).Sub(resolve(start, loc))
			switch {
			case sched.length <= 0:
				c.fail("endTime", "the window falls within a daylight-saving gap of %s and lasts no time", d.Timezone)
			case sched.length > MaxDuration:
				c.fail("endTime", "at most 31 days after startTime")
			}
		}
	}
	opt := recurrenceRule(&c, d)
	if d.RecurrenceEnd != nil {
		u := d.RecurrenceEnd.UTC()
		d.RecurrenceEnd, sched.until = &u, &u
		if d.Recurrence == Once {
			c.fail("recurrenceEnd", "a window that happens once has no recurrence to end")
		} else if okStart && loc != nil && u.Before(resolve(start, loc)) {
			c.fail("recurrenceEnd", "not before the first occurrence")
		}
	}
	checkTargets(&c, d.Targets)
	if err := c.err(); err != nil {
		return schedule{}, err
	}
	if opt != nil {
		opt.Dtstart = start
		r, err := rrule.NewRRule(*opt)
		if err != nil {
			return schedule{}, apperr.Invalid("rrule", err.Error())
		}
		sched.rule = r
	}
	if !check {
		return sched, nil
	}
	first := resolve(start, loc)
	if x := sched.between(first, first.Add(checkSpan), 0); x.overlapped {
		return schedule{}, apperr.Invalid("endTime", "occurrences would overlap: the window lasts longer than the time between two of its occurrences")
	}
	return sched, nil
}

// recurrenceRule returns the RRULE options of the definition's recurrence; nil for once.
func recurrenceRule(c *checker, d *definition) *rrule.ROption {
	if d.Recurrence != Custom && d.RRule != "" {
		c.fail("rrule", "only a custom recurrence has a rule")
		return nil
	}
	switch d.Recurrence {
	case Once:
		return nil
	case Daily:
		return &rrule.ROption{Freq: rrule.DAILY}
	case Weekly:
		return &rrule.ROption{Freq: rrule.WEEKLY}
	case Monthly:
		return &rrule.ROption{Freq: rrule.MONTHLY}
	case Custom:
		d.RRule = strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(d.RRule)), "RRULE:")
		if d.RRule == "" {
			c.fail("rrule", "a custom recurrence needs an RFC 5545 RRULE, such as FREQ=WEEKLY;BYDAY=SA;INTERVAL=2")
			return nil
		}
		opt, err := rrule.StrToROption(d.RRule)
		if err != nil {
			c.fail("rrule", "not a valid RRULE: %v", err)
			return nil
		}
		switch {
		case !opt.Dtstart.IsZero() || !opt.Until.IsZero():
			c.fail("rrule", "no DTSTART or UNTIL: startTime starts the recurrence and recurrenceEnd ends it")
		case opt.Freq > rrule.DAILY:
			c.fail("rrule", "FREQ is DAILY, WEEKLY, MONTHLY or YEARLY")
		case len(opt.Byhour) > 0 || len(opt.Byminute) > 0 || len(opt.Bysecond) > 0:
			c.fail("rrule", "no BYHOUR, BYMINUTE or BYSECOND: startTime gives the time of day")
		case opt.Interval < 0 || opt.Count < 0:
			c.fail("rrule", "INTERVAL and COUNT are positive")
		default:
			return opt
		}
		return nil
	}
	c.fail("recurrence", "once, daily, weekly, monthly or custom")
	return nil
}

// devicesTargets maps a window's targets onto devices' vocabulary: all is the window's
// organization.
func (t MaintenanceTargets) devicesTargets() devices.Targets {
	if t.Type == TargetAll {
		return devices.Targets{Type: devices.TargetOrganization, IDs: t.IDs}
	}
	return devices.Targets{Type: t.Type, IDs: t.IDs}
}

// checkTargets checks a window's targets before its organization is known (checkOwners then
// checks what they name): all names no IDs; sites, groups and devices are checked as devices
// checks any targets, for which the organization does not matter.
func checkTargets(c *checker, t MaintenanceTargets) {
	switch t.Type {
	case TargetAll:
		if len(t.IDs) > 0 {
			c.fail("targets.ids", "type all names no IDs")
		}
	case TargetSites, TargetGroups, TargetDevices:
		dt := t.devicesTargets()
		c.details = append(c.details, dt.CheckShape("")...)
	default:
		c.fail("targets.type", "type is one of all, sites, groups, devices")
	}
}

// uniqueIDs returns ids without repeats, in first-seen order.
func uniqueIDs(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}
