package clock

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// ParseCron reads a five-field cron expression (minute hour day-of-month month day-of-week)
// whose times are read in the time zone tz ("" is UTC).
func ParseCron(expr, tz string) (cron.Schedule, error) {
	if tz == "" {
		tz = "UTC"
	}
	if _, err := time.LoadLocation(tz); err != nil || strings.ContainsAny(tz, " \t") {
		return nil, fmt.Errorf("unknown time zone %q", tz)
	}
	fields := strings.Fields(expr)
	if len(fields) != 5 {
		return nil, fmt.Errorf("a cron expression has five fields (minute hour day-of-month month day-of-week)")
	}
	return cron.ParseStandard("CRON_TZ=" + tz + " " + strings.Join(fields, " "))
}
