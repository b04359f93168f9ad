package store

import (
	"fmt"
	"strings"
	"time"
)

// TimeColumns selects timestamp columns for scanning into NullTime, as a select-list
// fragment. Through an expression, SQLite hands back the stored text as it is, and NullTime
// parses its one layout directly; read as a bare column, the driver tries a list of layouts
// on every value, which costs more than reading the rest of a row of a list. PostgreSQL
// returns a time either way.
func TimeColumns(cols ...string) string {
	exprs := make([]string, len(cols))
	for i, c := range cols {
		exprs[i] = "COALESCE(" + c + ", NULL)"
	}
	return strings.Join(exprs, ", ")
}

// NullTime scans a nullable timestamp on either backend: a time from PostgreSQL, or the text
// of a column SQLite returns through TimeColumns. The time is in UTC.
type NullTime struct {
	Time  time.Time
	Valid bool
}

// Scan implements sql.Scanner.
func (t *NullTime) Scan(v any) error {
	var err error
	switch v := v.(type) {
	case nil:
		*t = NullTime{}
		return nil
	case time.Time:
		t.Time = v
	case string:
		t.Time, err = ParseSQLiteTime(v)
	case []byte:
		t.Time, err = ParseSQLiteTime(string(v))
	default:
		return fmt.Errorf("store: cannot scan %T into a time", v)
	}
	t.Time, t.Valid = t.Time.UTC(), err == nil
	return err
}

// Ptr points to the time, or is nil for NULL.
func (t *NullTime) Ptr() *time.Time {
	if !t.Valid {
		return nil
	}
	return &t.Time
}

// sqliteTimeLayouts are the forms a time takes in SQLite's text: what the driver writes (the
// first), and what SQL's own date functions and hand-written values produce.
var sqliteTimeLayouts = []string{
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02T15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04",
	"2006-01-02T15:04",
	"2006-01-02",
}

// ParseSQLiteTime parses a time as SQLite stores it: "YYYY-MM-DD HH:MM:SS[.fraction]" with
// an optional "Z" or ±HH:MM offset (no offset means UTC), or one of the shorter forms of
// sqliteTimeLayouts.
func ParseSQLiteTime(s string) (time.Time, error) {
	if t, ok := parseTimeFast(s); ok {
		return t, nil
	}
	for _, layout := range sqliteTimeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("store: unrecognized time %q", s)
}

// parseTimeFast reads the full form of ParseSQLiteTime by position, without time.Parse.
func parseTimeFast(s string) (time.Time, bool) {
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	year, ok1 := digits(s[0:4])
	month, ok2 := digits(s[5:7])
	day, ok3 := digits(s[8:10])
	hour, ok4 := digits(s[11:13])
	minute, ok5 := digits(s[14:16])
	sec, ok6 := digits(s[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 || day > 31 ||
		hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	rest := s[19:]
	nsec := 0
	if len(rest) > 0 && rest[0] == '.' {
		n := 1
		scale := 100_000_000
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			if n <= 9 {
				nsec += int(rest[n]-'0') * scale
				scale /= 10
			}
			n++
		}
		if n == 1 {
			return time.Time{}, false
		}
		rest = rest[n:]
	}
	offset := 0
	switch {
	case rest == "" || rest == "Z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, okh := digits(rest[1:3])
		om, okm := digits(rest[4:6])
		if !okh || !okm || om > 59 {
			return time.Time{}, false
		}
		offset = oh*3600 + om*60
		if rest[0] == '-' {
			offset = -offset
		}
	default:
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	if t.Day() != day { // 31 February and the like
		return time.Time{}, false
	}
	return t.Add(-time.Duration(offset) * time.Second), true
}

func digits(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
