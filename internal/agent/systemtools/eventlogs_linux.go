package systemtools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gale/internal/wire/agentproto"
)

// The logs every journald machine has, besides one per unit.
const (
	logSystem = "system"
	logKernel = "kernel"
)

const (
	defaultEventLimit = 100
	maxEventLimit     = 1000
)

var builtinLogs = []agentproto.EventLog{
	{Name: logSystem, DisplayName: "System", Description: "Every journal entry"},
	{Name: logKernel, DisplayName: "Kernel", Description: "Kernel messages of the current boot"},
}

// eventFields are the journal fields an event of a page carries besides the promoted ones;
// a single event carries them all.
var eventFields = []string{"_SYSTEMD_UNIT", "_COMM", "_HOSTNAME", "_UID"}

func (s *linuxSystem) logs(ctx context.Context) ([]agentproto.EventLog, error) {
	if !s.journald() {
		return s.textLogs()
	}
	units, err := s.journalUnits(ctx)
	if err != nil {
		return nil, err
	}
	out := append([]agentproto.EventLog{}, builtinLogs...)
	for _, u := range units {
		out = append(out, agentproto.EventLog{Name: u, Description: "Journal entries of " + u})
	}
	return out, nil
}

// journalUnits lists the units that have journal entries, sorted.
func (s *linuxSystem) journalUnits(ctx context.Context) ([]string, error) {
	out, err := s.run(ctx, "journalctl", "--field=_SYSTEMD_UNIT", "--no-pager")
	if err != nil {
		return nil, err
	}
	var units []string
	for _, u := range strings.Split(string(out), "\n") {
		if u = strings.TrimSpace(u); u != "" {
			units = append(units, u)
		}
	}
	sort.Strings(units)
	return units, nil
}

func (s *linuxSystem) log(ctx context.Context, name string) (agentproto.EventLog, error) {
	if !s.journald() {
		return s.textLog(name)
	}
	for _, l := range builtinLogs {
		if l.Name == name {
			return l, nil
		}
	}
	if err := checkUnitName(name); err != nil {
		return agentproto.EventLog{}, err
	}
	all, err := s.logs(ctx)
	if err != nil {
		return agentproto.EventLog{}, err
	}
	for _, l := range all {
		if l.Name == name {
			return l, nil
		}
	}
	return agentproto.EventLog{}, notFound("no log %s", name)
}

// logFilter gives the journalctl arguments that select a log.
func logFilter(name string) ([]string, error) {
	switch name {
	case "":
		return nil, invalid("name is required")
	case logSystem:
		return nil, nil
	case logKernel:
		return []string{"--dmesg"}, nil
	}
	if err := checkUnitName(name); err != nil {
		return nil, err
	}
	return []string{"--unit=" + name}, nil
}

// journalPriority maps a level to the worst journald priority it keeps (-p).
var journalPriority = map[string]string{"critical": "2", "error": "3", "warning": "4", "info": "6", "debug": "7"}

func checkCursor(c string) error {
	if strings.ContainsAny(c, "\x00\n") {
		return invalid("invalid cursor")
	}
	return nil
}

// events pages a log newest first. journalctl --reverse with --after-cursor continues with
// the entries older than the cursor, which is the next page.
func (s *linuxSystem) events(ctx context.Context, q agentproto.EventQuery) (agentproto.EventPage, error) {
	limit := q.Limit
	switch {
	case limit < 0:
		return agentproto.EventPage{}, invalid("limit must not be negative")
	case limit == 0:
		limit = defaultEventLimit
	case limit > maxEventLimit:
		limit = maxEventLimit
	}
	if !s.journald() {
		return s.textEvents(q, limit)
	}
	filter, err := logFilter(q.Name)
	if err != nil {
		return agentproto.EventPage{}, err
	}
	args := append([]string{"--output=json", "--no-pager", "--reverse", "--lines=" + strconv.Itoa(limit)}, filter...)
	// journalctl takes --since or a cursor, not both; with a cursor the entries older than
	// Since are dropped below instead.
	if !q.Since.IsZero() && q.Cursor == "" {
		args = append(args, "--since=@"+strconv.FormatInt(q.Since.Unix(), 10))
	}
	if !q.Until.IsZero() {
		args = append(args, "--until=@"+strconv.FormatInt(q.Until.Unix(), 10))
	}
	if q.Level != "" {
		p, ok := journalPriority[q.Level]
		if !ok {
			return agentproto.EventPage{}, invalid("unknown level %q: use critical, error, warning, info or debug", q.Level)
		}
		args = append(args, "--priority="+p)
	}
	if q.Cursor != "" {
		if err := checkCursor(q.Cursor); err != nil {
			return agentproto.EventPage{}, err
		}
		args = append(args, "--after-cursor="+q.Cursor)
	}
	if q.Contains != "" {
		// journalctl matches a pattern against the message; quoted, the text is plain.
		args = append(args, "--grep="+regexp.QuoteMeta(q.Contains), "--case-sensitive=false")
	}
	out, err := s.run(ctx, "journalctl", args...)
	if cursorRefused(err) {
		return agentproto.EventPage{}, invalid("invalid cursor %q", q.Cursor)
	}
	if err != nil {
		return agentproto.EventPage{}, err
	}
	entries, err := parseJournal(out)
	if err != nil {
		return agentproto.EventPage{}, err
	}
	page := agentproto.EventPage{Events: make([]agentproto.Event, 0, len(entries))}
	for _, e := range entries {
		ev := e.event(false)
		if ev.Time.Before(q.Since) {
			break // newest first: the rest are older still
		}
		page.Events = append(page.Events, ev)
	}
	if len(page.Events) == limit {
		page.NextCursor = page.Events[len(page.Events)-1].RecordID
	}
	return page, nil
}

// event reads one entry by its cursor, within the named log.
func (s *linuxSystem) event(ctx context.Context, a agentproto.EventArgs) (agentproto.Event, error) {
	if !s.journald() {
		return s.textEvent(a)
	}
	filter, err := logFilter(a.Name)
	if err != nil {
		return agentproto.Event{}, err
	}
	if a.RecordID == "" {
		return agentproto.Event{}, invalid("recordId is required")
	}
	if err := checkCursor(a.RecordID); err != nil {
		return agentproto.Event{}, err
	}
	args := append([]string{"--output=json", "--no-pager", "--lines=1", "--cursor=" + a.RecordID}, filter...)
	out, err := s.run(ctx, "journalctl", args...)
	if cursorRefused(err) {
		return agentproto.Event{}, notFound("no entry %s in %s", a.RecordID, a.Name)
	}
	if err != nil {
		return agentproto.Event{}, err
	}
	entries, err := parseJournal(out)
	if err != nil {
		return agentproto.Event{}, err
	}
	// journalctl starts at the nearest entry when the cursor's own is gone or not in the log.
	if len(entries) == 0 || entries[0]["__CURSOR"] != a.RecordID {
		return agentproto.Event{}, notFound("no entry %s in %s", a.RecordID, a.Name)
	}
	return entries[0].event(true), nil
}

// cursorRefused reports whether journalctl failed because it could not parse or seek to a
// cursor ("Failed to seek to cursor: Invalid argument").
func cursorRefused(err error) bool {
	var ce *cmdError
	return errors.As(err, &ce) && strings.Contains(ce.stderr, "cursor")
}

// journalEntry is one journal entry, every field decoded to a string.
type journalEntry map[string]string

// parseJournal reads `journalctl --output=json`: one JSON object per line.
func parseJournal(out []byte) ([]journalEntry, error) {
	var entries []journalEntry
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 16<<20) // an entry can carry a large field
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(line, &raw); err != nil {
			return nil, failed("reading the journal: %v", err)
		}
		e := make(journalEntry, len(raw))
		for k, v := range raw {
			e[k] = journalValue(v)
		}
		entries = append(entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, failed("reading the journal: %v", err)
	}
	return entries, nil
}

// journalValue decodes a field of journalctl's JSON: a string; an array of byte values
// when the field is not printable UTF-8; an array of values when the field is repeated
// (the first is kept); null when it is too large to show.
func journalValue(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var arr []json.RawMessage
	if json.Unmarshal(v, &arr) != nil || len(arr) == 0 {
		return ""
	}
	b := make([]byte, 0, len(arr))
	for _, x := range arr {
		n, err := strconv.ParseUint(string(x), 10, 8)
		if err != nil {
			return journalValue(arr[0])
		}
		b = append(b, byte(n))
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func (e journalEntry) event(allFields bool) agentproto.Event {
	ev := agentproto.Event{
		RecordID: e["__CURSOR"],
		Level:    journalLevel(e["PRIORITY"]),
		Message:  e["MESSAGE"],
		Source:   firstNonEmpty(e["SYSLOG_IDENTIFIER"], e["_COMM"], e["_SYSTEMD_UNIT"]),
	}
	if us, err := strconv.ParseInt(e["__REALTIME_TIMESTAMP"], 10, 64); err == nil {
		ev.Time = time.UnixMicro(us).UTC()
	}
	if pid, err := strconv.ParseInt(firstNonEmpty(e["_PID"], e["SYSLOG_PID"]), 10, 32); err == nil {
		ev.PID = int32(pid)
	}
	fields := map[string]any{}
	if allFields {
		for k, v := range e {
			switch k {
			case "__CURSOR", "__REALTIME_TIMESTAMP", "PRIORITY", "MESSAGE":
			default:
				fields[k] = v
			}
		}
	} else {
		for _, k := range eventFields {
			if v, ok := e[k]; ok {
				fields[k] = v
			}
		}
	}
	if len(fields) > 0 {
		ev.Fields = fields
	}
	return ev
}

// journalLevel maps a syslog priority to a level; an entry without one is informational.
func journalLevel(priority string) string {
	switch priority {
	case "0", "1", "2":
		return "critical"
	case "3":
		return "error"
	case "4":
		return "warning"
	case "7":
		return "debug"
	}
	return "info"
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
