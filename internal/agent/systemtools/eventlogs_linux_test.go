package systemtools

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"gale/internal/wire/agentproto"
)

// Three entries as journalctl --output=json writes them: a plain one, one whose MESSAGE
// holds an escape byte (an array of bytes), and one with a repeated field and a null.
const journalFixture = `{"__CURSOR":"s=abc;i=3","__REALTIME_TIMESTAMP":"1700000003000000","PRIORITY":"3","SYSLOG_IDENTIFIER":"sshd","_PID":"812","_SYSTEMD_UNIT":"ssh.service","_HOSTNAME":"web1","MESSAGE":"error: kex_exchange_identification: Connection closed"}
{"__CURSOR":"s=abc;i=2","__REALTIME_TIMESTAMP":"1700000002000000","PRIORITY":"6","_COMM":"app","MESSAGE":[27,91,51,49,109,114,101,100,27,91,48,109,32,255]}
{"__CURSOR":"s=abc;i=1","__REALTIME_TIMESTAMP":"1700000001500000","PRIORITY":"1","SYSLOG_IDENTIFIER":"kernel","MESSAGE":"Out of memory","TAG":["a","b"],"BIG":null}
`

func TestParseJournal(t *testing.T) {
	entries, err := parseJournal([]byte(journalFixture))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Fatalf("%d entries", len(entries))
	}
	got := entries[0].event(false)
	want := agentproto.Event{
		RecordID: "s=abc;i=3",
		Time:     time.Unix(1700000003, 0).UTC(),
		Level:    "error",
		Source:   "sshd",
		Message:  "error: kex_exchange_identification: Connection closed",
		PID:      812,
		Fields:   map[string]any{"_SYSTEMD_UNIT": "ssh.service", "_HOSTNAME": "web1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("event:\n got %+v\nwant %+v", got, want)
	}
	bin := entries[1].event(false)
	if bin.Message != "\x1b[31mred\x1b[0m \uFFFD" || bin.Source != "app" || bin.Level != "info" {
		t.Errorf("byte message: %+v", bin)
	}
	full := entries[2].event(true)
	if full.Level != "critical" || full.Time != time.UnixMilli(1700000001500).UTC() ||
		full.Fields["TAG"] != "a" || full.Fields["BIG"] != "" || full.Fields["SYSLOG_IDENTIFIER"] != "kernel" {
		t.Errorf("full event: %+v", full)
	}
	if _, ok := full.Fields["MESSAGE"]; ok {
		t.Error("promoted field repeated in Fields")
	}

	if _, err := parseJournal([]byte("{not json\n")); err == nil {
		t.Error("malformed journal accepted")
	}
}

func TestJournalLevel(t *testing.T) {
	for p, want := range map[string]string{"0": "critical", "2": "critical", "3": "error", "4": "warning", "5": "info", "6": "info", "7": "debug", "": "info"} {
		if got := journalLevel(p); got != want {
			t.Errorf("priority %q: %s, want %s", p, got, want)
		}
	}
}

func TestEventsQuery(t *testing.T) {
	since := time.Unix(1699990000, 0)
	f := &fakeRun{out: map[string]string{
		"journalctl --output=json --no-pager --reverse --lines=3 --unit=ssh.service --since=@1699990000 --priority=3":      journalFixture,
		"journalctl --output=json --no-pager --reverse --lines=3 --unit=ssh.service --priority=3 --after-cursor=s=abc;i=9": journalFixture,
		"journalctl --output=json --no-pager --reverse --lines=1000 --dmesg":                                               journalFixture,
		"journalctl --output=json --no-pager --lines=1 --cursor=s=abc;i=3":                                                 journalFixture,
		"journalctl --output=json --no-pager --lines=1 --cursor=s=abc;i=7":                                                 journalFixture,
	}, errs: map[string]error{
		"journalctl --output=json --no-pager --reverse --lines=100 --after-cursor=junk": &cmdError{cmd: "journalctl", stderr: "Failed to seek to cursor: Invalid argument", err: errors.New("exit status 1")},
		"journalctl --output=json --no-pager --lines=1 --cursor=junk":                   &cmdError{cmd: "journalctl", stderr: "Failed to seek to cursor: Invalid argument", err: errors.New("exit status 1")},
	}}
	tools := &Tools{sys: fakeSystem(f, true)}
	wantCode(t, call(t, tools, agentproto.MethodEventLogEvents, agentproto.EventQuery{Name: "system", Cursor: "junk"}), agentproto.ErrInvalid)
	wantCode(t, call(t, tools, agentproto.MethodEventLogEvent, agentproto.EventArgs{Name: "system", RecordID: "junk"}), agentproto.ErrNotFound)

	page := result[agentproto.EventPage](t, call(t, tools, agentproto.MethodEventLogEvents,
		agentproto.EventQuery{Name: "ssh.service", Limit: 3, Since: since, Level: "error"}))
	if len(page.Events) != 3 || page.NextCursor != "s=abc;i=1" {
		t.Errorf("page: %d events, next %q", len(page.Events), page.NextCursor)
	}
	// The next page: journalctl refuses --since with a cursor, so Since is applied here.
	page = result[agentproto.EventPage](t, call(t, tools, agentproto.MethodEventLogEvents,
		agentproto.EventQuery{Name: "ssh.service", Limit: 3, Since: time.Unix(1700000002, 0), Level: "error", Cursor: "s=abc;i=9"}))
	if len(page.Events) != 2 || page.NextCursor != "" {
		t.Errorf("next page: %d events, next %q", len(page.Events), page.NextCursor)
	}
	// The limit is capped; a short page has no next cursor.
	page = result[agentproto.EventPage](t, call(t, tools, agentproto.MethodEventLogEvents, agentproto.EventQuery{Name: "kernel", Limit: 5000}))
	if len(page.Events) != 3 || page.NextCursor != "" {
		t.Errorf("kernel page: %d events, next %q", len(page.Events), page.NextCursor)
	}

	ev := result[agentproto.Event](t, call(t, tools, agentproto.MethodEventLogEvent, agentproto.EventArgs{Name: "system", RecordID: "s=abc;i=3"}))
	if ev.RecordID != "s=abc;i=3" || ev.Fields["_PID"] != "812" {
		t.Errorf("event %+v", ev)
	}
	// journalctl moved to another entry: the asked one is gone.
	wantCode(t, call(t, tools, agentproto.MethodEventLogEvent, agentproto.EventArgs{Name: "system", RecordID: "s=abc;i=7"}), agentproto.ErrNotFound)

	wantCode(t, call(t, tools, agentproto.MethodEventLogEvents, agentproto.EventQuery{Name: "system", Level: "loud"}), agentproto.ErrInvalid)
	wantCode(t, call(t, tools, agentproto.MethodEventLogEvents, agentproto.EventQuery{Name: "system", Limit: -1}), agentproto.ErrInvalid)
	wantCode(t, call(t, tools, agentproto.MethodEventLogEvents, agentproto.EventQuery{Name: "--all"}), agentproto.ErrInvalid)
	wantCode(t, call(t, tools, agentproto.MethodEventLogEvents, agentproto.EventQuery{}), agentproto.ErrInvalid)
	wantCode(t, call(t, tools, agentproto.MethodEventLogEvent, agentproto.EventArgs{Name: "system"}), agentproto.ErrInvalid)
}

func TestEventLogList(t *testing.T) {
	f := &fakeRun{out: map[string]string{"journalctl --field=_SYSTEMD_UNIT --no-pager": "ssh.service\ncron.service\n\n"}}
	tools := &Tools{sys: fakeSystem(f, true)}
	logs := result[[]agentproto.EventLog](t, call(t, tools, agentproto.MethodEventLogList, nil))
	var names []string
	for _, l := range logs {
		names = append(names, l.Name)
	}
	if want := []string{"system", "kernel", "cron.service", "ssh.service"}; !reflect.DeepEqual(names, want) {
		t.Errorf("logs %q", names)
	}
	if l := result[agentproto.EventLog](t, call(t, tools, agentproto.MethodEventLogGet, agentproto.NameArgs{Name: "cron.service"})); l.Name != "cron.service" {
		t.Errorf("get %+v", l)
	}
	wantCode(t, call(t, tools, agentproto.MethodEventLogGet, agentproto.NameArgs{Name: "nginx.service"}), agentproto.ErrNotFound)
}

func TestEventLogsWithoutJournaldAreLogFiles(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "var/log"), 0o755); err != nil {
		t.Fatal(err)
	}
	syslog := "2024-05-01T10:00:00.000000+00:00 web1 sshd[812]: Accepted publickey for alice\n" +
		"2024-05-01T10:00:01.000000+00:00 web1 CRON[900]: (root) CMD (run-parts /etc/cron.hourly)\n" +
		"\n" +
		"2024-05-01T10:00:02.000000+00:00 web1 sshd[813]: Failed password for bob\n"
	if err := os.WriteFile(filepath.Join(root, "var/log/syslog"), []byte(syslog), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "var/log/auth.log"), []byte("May  1 10:00:00 web1 su: session opened\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tools := &Tools{sys: &linuxSystem{root: root, run: runCommand, journald: func() bool { return false }}}
	logs := result[[]agentproto.EventLog](t, call(t, tools, agentproto.MethodEventLogList, nil))
	if len(logs) != 2 || logs[0].Name != "syslog" || logs[1].Name != "auth.log" {
		t.Fatalf("logs = %+v", logs)
	}
	wantCode(t, call(t, tools, agentproto.MethodEventLogGet, agentproto.NameArgs{Name: "kern.log"}), agentproto.ErrNotFound)
	wantCode(t, call(t, tools, agentproto.MethodEventLogGet, agentproto.NameArgs{Name: "../../etc/shadow"}), agentproto.ErrNotFound)

	// Newest first, two to a page, continued by the cursor.
	page := result[agentproto.EventPage](t, call(t, tools, agentproto.MethodEventLogEvents, agentproto.EventQuery{Name: "syslog", Limit: 2}))
	if len(page.Events) != 2 || page.Events[0].Message != "Failed password for bob" || page.Events[0].Source != "sshd" ||
		page.Events[0].PID != 813 || page.Events[0].RecordID != "4" || page.NextCursor != "2" {
		t.Fatalf("first page = %+v", page)
	}
	if want := time.Date(2024, 5, 1, 10, 0, 2, 0, time.UTC); !page.Events[0].Time.Equal(want) {
		t.Errorf("time = %v", page.Events[0].Time)
	}
	page = result[agentproto.EventPage](t, call(t, tools, agentproto.MethodEventLogEvents, agentproto.EventQuery{Name: "syslog", Limit: 2, Cursor: page.NextCursor}))
	if len(page.Events) != 1 || page.Events[0].RecordID != "1" || page.NextCursor != "" {
		t.Fatalf("second page = %+v", page)
	}
	page = result[agentproto.EventPage](t, call(t, tools, agentproto.MethodEventLogEvents, agentproto.EventQuery{Name: "syslog", Contains: "SSHD"}))
	if len(page.Events) != 2 || page.Events[1].RecordID != "1" {
		t.Fatalf("contains, on the whole line = %+v", page)
	}
	page = result[agentproto.EventPage](t, call(t, tools, agentproto.MethodEventLogEvents, agentproto.EventQuery{Name: "syslog", Contains: "PASSWORD"}))
	if len(page.Events) != 1 || page.Events[0].RecordID != "4" {
		t.Fatalf("contains = %+v", page)
	}
	ev := result[agentproto.Event](t, call(t, tools, agentproto.MethodEventLogEvent, agentproto.EventArgs{Name: "auth.log", RecordID: "1"}))
	if ev.Source != "su" || ev.Message != "session opened" || ev.Time.Month() != time.May {
		t.Fatalf("event = %+v", ev)
	}
	wantCode(t, call(t, tools, agentproto.MethodEventLogEvent, agentproto.EventArgs{Name: "auth.log", RecordID: "9"}), agentproto.ErrNotFound)

	bare := &Tools{sys: &linuxSystem{root: t.TempDir(), run: runCommand, journald: func() bool { return false }}}
	wantCode(t, call(t, bare, agentproto.MethodEventLogList, nil), agentproto.ErrNotSupported)
}
