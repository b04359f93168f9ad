package systemtools

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gale/internal/wire/agentproto"
)

const crontabFixture = `# /etc/crontab: system-wide crontab
SHELL=/bin/sh
PATH = /usr/local/sbin:/usr/local/bin:/sbin:/bin

17 *	* * *	root    cd / && run-parts --report /etc/cron.hourly
#25 6	* * *	root	disabled by hand, not a task
@reboot         root    /usr/local/bin/on-boot --flag  "two  spaces"
not a cron line at all
`

const userCrontabFixture = `MAILTO=""
*/5 * * * * /home/alice/bin/poll >/dev/null 2>&1
0 3 * * mon-fri echo "100%" > /tmp/x
`

// cronFixture lays out a crontab, a cron.d table and a user table under a temp dir.
func cronFixture(t *testing.T) (string, *linuxSystem) {
	t.Helper()
	root := t.TempDir()
	for name, body := range map[string]string{
		"crontab":                    crontabFixture,
		"cron.d/backup":              "30 2 * * * backup /usr/bin/backup --all\n",
		"cron.d/.placeholder":        "1 1 * * * root ignored\n",
		"spool/crontabs/alice":       userCrontabFixture,
		"spool/crontabs/alice.bak~":  "1 1 * * * ignored\n",
		"elsewhere/not-a-cron-table": "1 1 * * * root nope\n",
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := &linuxSystem{
		cron: CronRoots{
			SystemFiles: []string{filepath.Join(root, "crontab")},
			SystemDirs:  []string{filepath.Join(root, "cron.d"), filepath.Join(root, "missing")},
			UserDirs:    []string{filepath.Join(root, "spool/crontabs")},
		},
		systemd:  func() bool { return false },
		journald: func() bool { return false },
	}
	return root, s
}

func TestCronList(t *testing.T) {
	root, s := cronFixture(t)
	tasks := result[[]agentproto.Task](t, call(t, &Tools{sys: s}, agentproto.MethodTaskList, nil))
	p := func(file string, line string) string {
		return "cron/" + strings.TrimPrefix(root, "/") + "/" + file + "/" + line
	}
	want := []agentproto.Task{
		{Path: p("crontab", "5"), Name: "crontab:5", Kind: "cron", Schedule: "17 * * * *", User: "root", Enabled: true,
			Command: "cd / && run-parts --report /etc/cron.hourly"},
		{Path: p("crontab", "7"), Name: "crontab:7", Kind: "cron", Schedule: "@reboot", User: "root", Enabled: true,
			Command: `/usr/local/bin/on-boot --flag  "two  spaces"`},
		{Path: p("cron.d/backup", "1"), Name: "backup:1", Kind: "cron", Schedule: "30 2 * * *", User: "backup", Enabled: true,
			Command: "/usr/bin/backup --all"},
		{Path: p("spool/crontabs/alice", "2"), Name: "alice:2", Kind: "cron", Schedule: "*/5 * * * *", User: "alice", Enabled: true,
			Command: "/home/alice/bin/poll >/dev/null 2>&1"},
		{Path: p("spool/crontabs/alice", "3"), Name: "alice:3", Kind: "cron", Schedule: "0 3 * * mon-fri", User: "alice", Enabled: true,
			Command: `echo "100%" > /tmp/x`},
	}
	if !reflect.DeepEqual(tasks, want) {
		t.Errorf("tasks:\n got %+v\nwant %+v", tasks, want)
	}
	got := result[agentproto.Task](t, call(t, &Tools{sys: s}, agentproto.MethodTaskGet, agentproto.PathArgs{Path: want[2].Path}))
	if got != want[2] {
		t.Errorf("get = %+v", got)
	}
	// No history without journald, but an empty list rather than an error.
	if runs := result[[]agentproto.TaskRun](t, call(t, &Tools{sys: s}, agentproto.MethodTaskHistory, agentproto.PathArgs{Path: want[2].Path})); len(runs) != 0 {
		t.Errorf("history %+v", runs)
	}
}

func TestCronEnableDisable(t *testing.T) {
	root, s := cronFixture(t)
	tools := &Tools{sys: s}
	file := filepath.Join(root, "crontab")
	before, _ := os.ReadFile(file)
	path := cronTaskPath(file, 7)

	task := result[agentproto.Task](t, call(t, tools, agentproto.MethodTaskDisable, agentproto.PathArgs{Path: path}))
	if task.Enabled || task.Path != path || task.Schedule != "@reboot" {
		t.Errorf("disabled task %+v", task)
	}
	data, _ := os.ReadFile(file)
	lines := strings.Split(string(data), "\n")
	if lines[6] != `#gale-disabled# @reboot         root    /usr/local/bin/on-boot --flag  "two  spaces"` {
		t.Errorf("line 7 = %q", lines[6])
	}
	if info, _ := os.Stat(file); info.Mode().Perm() != 0o600 {
		t.Errorf("mode changed to %v", info.Mode())
	}
	// Still listed, as disabled; disabling again changes nothing.
	if got := result[agentproto.Task](t, call(t, tools, agentproto.MethodTaskGet, agentproto.PathArgs{Path: path})); got.Enabled {
		t.Error("get after disable: enabled")
	}
	result[agentproto.Task](t, call(t, tools, agentproto.MethodTaskDisable, agentproto.PathArgs{Path: path}))

	task = result[agentproto.Task](t, call(t, tools, agentproto.MethodTaskEnable, agentproto.PathArgs{Path: path}))
	if !task.Enabled {
		t.Errorf("enabled task %+v", task)
	}
	if after, _ := os.ReadFile(file); string(after) != string(before) {
		t.Errorf("round trip changed the file:\n%s", after)
	}
	if left, _ := filepath.Glob(filepath.Join(root, ".crontab.gale-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestCronPathRefusals(t *testing.T) {
	root, s := cronFixture(t)
	tools := &Tools{sys: s}
	for _, p := range []string{
		cronTaskPath(filepath.Join(root, "elsewhere/not-a-cron-table"), 1), // outside the roots
		cronTaskPath(filepath.Join(root, "crontab"), 2),                    // an environment line
		cronTaskPath(filepath.Join(root, "crontab"), 99),
	} {
		wantCode(t, call(t, tools, agentproto.MethodTaskDisable, agentproto.PathArgs{Path: p}), agentproto.ErrNotFound)
	}
	if data, _ := os.ReadFile(filepath.Join(root, "elsewhere/not-a-cron-table")); string(data) != "1 1 * * * root nope\n" {
		t.Errorf("file outside the roots changed: %q", data)
	}
	wantCode(t, call(t, tools, agentproto.MethodTaskGet, agentproto.PathArgs{Path: "cron/etc/crontab/x"}), agentproto.ErrInvalid)
	wantCode(t, call(t, tools, agentproto.MethodTaskGet, agentproto.PathArgs{Path: "at/1"}), agentproto.ErrInvalid)
	wantCode(t, call(t, tools, agentproto.MethodTaskGet, agentproto.PathArgs{}), agentproto.ErrInvalid)
	// Timers need systemd.
	wantCode(t, call(t, tools, agentproto.MethodTaskRun, agentproto.PathArgs{Path: "timer/logrotate.timer"}), agentproto.ErrNotSupported)
}

func TestCronRun(t *testing.T) {
	root := t.TempDir()
	marker := filepath.Join(root, "ran")
	table := filepath.Join(root, "alice")
	if err := os.WriteFile(table, []byte("* * * * * echo ok > "+marker+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &linuxSystem{cron: CronRoots{UserDirs: []string{root}}, systemd: func() bool { return false }}
	done := result[agentproto.Done](t, call(t, &Tools{sys: s}, agentproto.MethodTaskRun, agentproto.PathArgs{Path: cronTaskPath(table, 1)}))
	if !done.OK {
		t.Fatalf("done %+v", done)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if data, err := os.ReadFile(marker); err == nil && string(data) == "ok\n" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not run")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const listTimersFixture = `Mon 2024-01-01 00:00:00 UTC 5h 2min left Sun 2023-12-31 00:00:00 UTC 18h ago logrotate.timer logrotate.service
Mon 2024-01-01 06:12:00 UTC 11h left     n/a                         n/a          apt-daily.timer apt-daily.service
n/a                         n/a          n/a                         n/a          orphan.timer
`

const showTimersFixture = `Id=logrotate.timer
ActiveState=active
Result=success
TimersCalendar={ OnCalendar=*-*-* 00:00:00 ; next_elapse=Mon 2024-01-01 00:00:00 UTC }
TimersMonotonic=
LastTriggerUSec=Sun 2023-12-31 00:00:00 UTC
NextElapseUSecRealtime=Mon 2024-01-01 00:00:00 UTC

Id=logrotate.service
ActiveState=inactive
Result=exit-code
LastTriggerUSec=
NextElapseUSecRealtime=

Id=apt-daily.timer
ActiveState=inactive
Result=success
TimersCalendar={ OnCalendar=*-*-* 06:00:00 ; next_elapse=n/a }
TimersCalendar={ OnCalendar=*-*-* 18:00:00 ; next_elapse=n/a }
TimersMonotonic={ OnBootUSec=15min ; next_elapse=n/a }
LastTriggerUSec=n/a
NextElapseUSecRealtime=

Id=apt-daily.service
ActiveState=inactive
Result=success

Id=orphan.timer
ActiveState=inactive
`

func TestTimers(t *testing.T) {
	timers := parseListTimers([]byte(listTimersFixture))
	if want := []timer{{"logrotate.timer", "logrotate.service"}, {"apt-daily.timer", "apt-daily.service"}, {"orphan.timer", ""}}; !reflect.DeepEqual(timers, want) {
		t.Fatalf("timers %+v", timers)
	}
	show := "systemctl show --no-pager --property=Id,ActiveState,Result,TimersCalendar,TimersMonotonic,LastTriggerUSec,NextElapseUSecRealtime logrotate.timer logrotate.service apt-daily.timer apt-daily.service orphan.timer"
	f := &fakeRun{out: map[string]string{
		"systemctl list-timers --all --no-legend --no-pager": listTimersFixture,
		show: showTimersFixture,
		"systemctl --no-ask-password --no-block start logrotate.service": "",
		"systemctl --no-ask-password enable --now apt-daily.timer":       "",
		"journalctl --output=json --no-pager --reverse --lines=1000 --unit=logrotate.service": `{"__CURSOR":"c3","__REALTIME_TIMESTAMP":"1700000300000000","MESSAGE_ID":"be02cf6855d2428ba40df7e9d022f03d","MESSAGE":"Failed to start logrotate.service"}
{"__CURSOR":"c2","__REALTIME_TIMESTAMP":"1700000200000000","MESSAGE":"rotating logs"}
{"__CURSOR":"c1","__REALTIME_TIMESTAMP":"1700000100000000","MESSAGE_ID":"39f53479d3a045ac8e11786248231fbf","MESSAGE":"Finished logrotate.service"}
`,
	}}
	_, s := cronFixture(t)
	s.run, s.systemd, s.journald = f.run, func() bool { return true }, func() bool { return true }
	tools := &Tools{sys: s}

	all := result[[]agentproto.Task](t, call(t, tools, agentproto.MethodTaskList, nil))
	if len(all) != 8 || all[0].Kind != "cron" || all[7].Kind != "systemd-timer" {
		t.Fatalf("list: %d tasks", len(all))
	}
	got := result[agentproto.Task](t, call(t, tools, agentproto.MethodTaskGet, agentproto.PathArgs{Path: "timer/logrotate.timer"}))
	want := agentproto.Task{
		Path: "timer/logrotate.timer", Name: "logrotate.timer", Kind: "systemd-timer",
		Schedule: "OnCalendar=*-*-* 00:00:00", Command: "logrotate.service", Enabled: true,
		LastRunAt:  time.Date(2023, 12, 31, 0, 0, 0, 0, time.UTC),
		NextRunAt:  time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
		LastResult: "exit-code",
	}
	if !got.LastRunAt.Equal(want.LastRunAt) || !got.NextRunAt.Equal(want.NextRunAt) {
		t.Errorf("times %v %v", got.LastRunAt, got.NextRunAt)
	}
	got.LastRunAt, got.NextRunAt, want.LastRunAt, want.NextRunAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if got != want {
		t.Errorf("timer:\n got %+v\nwant %+v", got, want)
	}
	apt := result[agentproto.Task](t, call(t, tools, agentproto.MethodTaskGet, agentproto.PathArgs{Path: "timer/apt-daily.timer"}))
	if apt.Schedule != "OnCalendar=*-*-* 06:00:00; OnCalendar=*-*-* 18:00:00; OnBootUSec=15min" || apt.Enabled || !apt.LastRunAt.IsZero() {
		t.Errorf("apt-daily %+v", apt)
	}

	if d := result[agentproto.Done](t, call(t, tools, agentproto.MethodTaskRun, agentproto.PathArgs{Path: "timer/logrotate.timer"})); !d.OK {
		t.Errorf("run %+v", d)
	}
	result[agentproto.Task](t, call(t, tools, agentproto.MethodTaskEnable, agentproto.PathArgs{Path: "timer/apt-daily.timer"}))
	if !strings.Contains(strings.Join(f.ran, "\n"), "enable --now apt-daily.timer") {
		t.Errorf("enable not run: %q", f.ran)
	}

	runs := result[[]agentproto.TaskRun](t, call(t, tools, agentproto.MethodTaskHistory, agentproto.PathArgs{Path: "timer/logrotate.timer"}))
	if len(runs) != 2 || runs[0].Result != "failed" || runs[1].Result != "success" || !runs[1].StartedAt.Equal(time.Unix(1700000100, 0)) {
		t.Errorf("history %+v", runs)
	}

	wantCode(t, call(t, tools, agentproto.MethodTaskGet, agentproto.PathArgs{Path: "timer/nope.timer"}), agentproto.ErrNotFound)
	wantCode(t, call(t, tools, agentproto.MethodTaskRun, agentproto.PathArgs{Path: "timer/--now"}), agentproto.ErrInvalid)
	wantCode(t, call(t, tools, agentproto.MethodTaskRun, agentproto.PathArgs{Path: "timer/orphan.timer"}), agentproto.ErrFailed)
}
