package systemtools

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gale/internal/wire/agentproto"
)

// Without journald, the logs are the plain-text files syslog daemons write under /var/log. An
// entry is a line; its record ID is its line number, so a page continues with the lines
// before its cursor. The files carry no severity: every entry is info and the level filter
// keeps them all, which shows more rather than hiding what may matter.

// textLogs are the files looked for, by log name.
var textLogs = []agentproto.EventLog{
	{Name: "syslog", DisplayName: "System log", Description: "/var/log/syslog"},
	{Name: "messages", DisplayName: "Messages", Description: "/var/log/messages"},
	{Name: "auth.log", DisplayName: "Authentication", Description: "/var/log/auth.log"},
	{Name: "secure", DisplayName: "Authentication", Description: "/var/log/secure"},
	{Name: "kern.log", DisplayName: "Kernel", Description: "/var/log/kern.log"},
}

// maxTextLogRead is how much of a log's end is read for one page: older lines of a larger
// file are out of reach.
const maxTextLogRead = 32 << 20

func (s *linuxSystem) textLogPath(name string) string {
	return filepath.Join(s.root, "var", "log", name)
}

func (s *linuxSystem) textLogs() ([]agentproto.EventLog, error) {
	out := []agentproto.EventLog{}
	for _, l := range textLogs {
		if info, err := os.Stat(s.textLogPath(l.Name)); err == nil && info.Mode().IsRegular() {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return nil, notSupported("neither journald nor log files under /var/log are on this machine")
	}
	return out, nil
}

func (s *linuxSystem) textLog(name string) (agentproto.EventLog, error) {
	logs, err := s.textLogs()
	if err != nil {
		return agentproto.EventLog{}, err
	}
	for _, l := range logs {
		if l.Name == name {
			return l, nil
		}
	}
	return agentproto.EventLog{}, notFound("no log %s", name)
}

// textLogLines reads a log's lines, numbered from 1 (of the part read).
func (s *linuxSystem) textLogLines(name string) ([]string, error) {
	if _, err := s.textLog(name); err != nil {
		return nil, err
	}
	path := s.textLogPath(name)
	f, err := os.Open(path)
	if err != nil {
		return nil, fileError(path, err)
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() > maxTextLogRead {
		if _, err := f.Seek(-maxTextLogRead, io.SeekEnd); err != nil {
			return nil, fileError(path, err)
		}
	}
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, string(bytes.ToValidUTF8(sc.Bytes(), []byte("\uFFFD"))))
	}
	if err := sc.Err(); err != nil {
		return nil, failed("reading %s: %v", path, err)
	}
	return lines, nil
}

func (s *linuxSystem) textEvents(q agentproto.EventQuery, limit int) (agentproto.EventPage, error) {
	lines, err := s.textLogLines(q.Name)
	if err != nil {
		return agentproto.EventPage{}, err
	}
	end := len(lines)
	if q.Cursor != "" {
		n, err := strconv.Atoi(q.Cursor)
		if err != nil || n < 1 {
			return agentproto.EventPage{}, invalid("invalid cursor %q", q.Cursor)
		}
		end = min(n-1, len(lines))
	}
	page := agentproto.EventPage{Events: []agentproto.Event{}}
	for i := end - 1; i >= 0; i-- {
		if strings.TrimSpace(lines[i]) == "" || (q.Contains != "" && !strings.Contains(strings.ToLower(lines[i]), strings.ToLower(q.Contains))) {
			continue
		}
		ev := textEvent(lines[i], i+1)
		if !q.Until.IsZero() && ev.Time.After(q.Until) {
			continue
		}
		if !q.Since.IsZero() && !ev.Time.IsZero() && ev.Time.Before(q.Since) {
			break // newest first: the rest are older still
		}
		page.Events = append(page.Events, ev)
		if len(page.Events) == limit {
			if i > 0 {
				page.NextCursor = ev.RecordID
			}
			break
		}
	}
	return page, nil
}

func (s *linuxSystem) textEvent(a agentproto.EventArgs) (agentproto.Event, error) {
	lines, err := s.textLogLines(a.Name)
	if err != nil {
		return agentproto.Event{}, err
	}
	n, err := strconv.Atoi(a.RecordID)
	if err != nil || n < 1 || n > len(lines) {
		return agentproto.Event{}, notFound("no entry %s in %s", a.RecordID, a.Name)
	}
	return textEvent(lines[n-1], n), nil
}

// textEvent reads a syslog line: "2024-05-01T10:00:00.123456+00:00 host prog[pid]: message"
// (RFC 3339, rsyslog's newer default) or "May  1 10:00:00 host prog[pid]: message" (the
// traditional form, which has no year: the current one is assumed, or the last when that puts
// the line in the future). A line of another form is all message.
func textEvent(line string, n int) agentproto.Event {
	ev := agentproto.Event{RecordID: strconv.Itoa(n), Level: "info", Message: line}
	rest := line
	if f, after := splitFields(line, 1); len(f) == 1 {
		if t, err := time.Parse(time.RFC3339Nano, f[0]); err == nil {
			ev.Time, rest = t.UTC(), after
		}
	}
	if ev.Time.IsZero() && len(line) > 15 {
		if t, err := time.ParseInLocation("Jan _2 15:04:05", line[:15], time.Local); err == nil {
			now := time.Now()
			t = t.AddDate(now.Year(), 0, 0)
			if t.After(now.Add(24 * time.Hour)) {
				t = t.AddDate(-1, 0, 0)
			}
			ev.Time, rest = t.UTC(), strings.TrimLeft(line[15:], " ")
		}
	}
	if ev.Time.IsZero() {
		return ev
	}
	// host tag: message
	f, msg := splitFields(rest, 1)
	tag, message, ok := strings.Cut(msg, ": ")
	if len(f) == 0 || !ok || strings.ContainsAny(tag, " \t") {
		ev.Message = rest
		return ev
	}
	ev.Fields = map[string]any{"host": f[0]}
	ev.Message = message
	if name, pid, ok := strings.Cut(tag, "["); ok {
		tag = name
		if p, err := strconv.ParseInt(strings.TrimSuffix(pid, "]"), 10, 32); err == nil {
			ev.PID = int32(p)
		}
	}
	ev.Source = tag
	return ev
}
