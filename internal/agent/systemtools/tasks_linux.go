package systemtools

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gale/internal/wire/agentproto"
)

// Tasks are cron lines and systemd timers.
//
// A cron task's path is "cron/<file without its leading slash>/<line number>". Disabling a
// cron line comments it out behind cronDisabledMarker, so enabling it again restores it
// exactly and line numbers never move. Running a cron task starts its command with /bin/sh
// as the agent's user (not the user the table names) and does not wait for it.
//
// A timer's path is "timer/<unit>". Running it starts the service it activates; enabling
// and disabling go through systemctl enable|disable --now. A timer counts as enabled while
// it is active, that is while it will fire.

const (
	kindCron  = "cron"
	kindTimer = "systemd-timer"

	cronDisabledMarker = "#gale-disabled# "

	maxTaskRuns = 50
)

// cronTable is one cron file. A system table's lines name the user; a user table is named
// after its user.
type cronTable struct {
	path     string
	withUser bool
	user     string
}

// cronJob is one job line of a table.
type cronJob struct {
	line     int // from 1
	schedule string
	user     string
	command  string
	enabled  bool
}

var (
	cronEnvLine    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*\s*=`)
	cronFieldChars = regexp.MustCompile(`^[0-9A-Za-z*/,\-]+$`)
)

// parseCronLine reads one line of a table; ok is false for blank lines, comments and
// environment settings.
func parseCronLine(line string, withUser bool) (job cronJob, ok bool) {
	job.enabled = true
	if rest, disabled := strings.CutPrefix(line, cronDisabledMarker); disabled {
		line, job.enabled = rest, false
	}
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '#' || cronEnvLine.MatchString(line) {
		return cronJob{}, false
	}
	n := 5
	switch {
	case line[0] == '@':
		n = 1 // @daily, @reboot...
	case line[0] != '*' && (line[0] < '0' || line[0] > '9'):
		return cronJob{}, false // minutes are numbers, so anything else is not a job
	default:
		sched, _ := splitFields(line, 5)
		for _, f := range sched {
			if !cronFieldChars.MatchString(f) {
				return cronJob{}, false
			}
		}
	}
	if withUser {
		n++
	}
	f, cmd := splitFields(line, n)
	if len(f) < n || cmd == "" {
		return cronJob{}, false
	}
	if withUser {
		job.user, f = f[n-1], f[:n-1]
	}
	job.schedule, job.command = strings.Join(f, " "), cmd
	return job, true
}

// parseCron reads every job of a table.
func parseCron(data []byte, t cronTable) []cronJob {
	var jobs []cronJob
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		if job, ok := parseCronLine(sc.Text(), t.withUser); ok {
			job.line = n
			if !t.withUser {
				job.user = t.user
			}
			jobs = append(jobs, job)
		}
	}
	return jobs
}

// cronTables finds the tables under the configured roots. Missing roots are skipped.
func (s *linuxSystem) cronTables() []cronTable {
	var tables []cronTable
	seen := map[string]bool{}
	add := func(p string, withUser bool, user string) {
		if info, err := os.Stat(p); err != nil || !info.Mode().IsRegular() || seen[p] {
			return
		}
		seen[p] = true
		tables = append(tables, cronTable{path: p, withUser: withUser, user: user})
	}
	// cron ignores hidden files and editor backups in its directories.
	inDir := func(dir string, fn func(p, name string)) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if name := e.Name(); !strings.HasPrefix(name, ".") && !strings.HasSuffix(name, "~") {
				fn(filepath.Join(dir, name), name)
			}
		}
	}
	for _, f := range s.cron.SystemFiles {
		add(filepath.Clean(f), true, "")
	}
	for _, d := range s.cron.SystemDirs {
		inDir(d, func(p, _ string) { add(p, true, "") })
	}
	for _, d := range s.cron.UserDirs {
		inDir(d, func(p, name string) { add(p, false, name) })
	}
	return tables
}

func cronTaskPath(file string, line int) string {
	return "cron/" + strings.TrimPrefix(filepath.ToSlash(file), "/") + "/" + strconv.Itoa(line)
}

func cronTask(t cronTable, j cronJob) agentproto.Task {
	return agentproto.Task{
		Path:     cronTaskPath(t.path, j.line),
		Name:     filepath.Base(t.path) + ":" + strconv.Itoa(j.line),
		Kind:     kindCron,
		Schedule: j.schedule,
		Command:  j.command,
		User:     j.user,
		Enabled:  j.enabled,
	}
}

func (s *linuxSystem) cronTasks() []agentproto.Task {
	var tasks []agentproto.Task
	for _, t := range s.cronTables() {
		data, err := os.ReadFile(t.path)
		if err != nil {
			continue // unreadable tables are not the agent's to list
		}
		for _, j := range parseCron(data, t) {
			tasks = append(tasks, cronTask(t, j))
		}
	}
	return tasks
}

// cronJobAt finds the job a task path names. Only tables under the cron roots qualify, so a
// path cannot point the agent at any other file.
func (s *linuxSystem) cronJobAt(path string) (cronTable, cronJob, error) {
	rest, _ := strings.CutPrefix(path, "cron/")
	i := strings.LastIndexByte(rest, '/')
	line, err := strconv.Atoi(rest[i+1:])
	if i < 0 || err != nil || line < 1 {
		return cronTable{}, cronJob{}, invalid("invalid cron task path %q", path)
	}
	file := "/" + rest[:i]
	for _, t := range s.cronTables() {
		if t.path != file {
			continue
		}
		data, err := os.ReadFile(t.path)
		if err != nil {
			return cronTable{}, cronJob{}, fileError(t.path, err)
		}
		for _, j := range parseCron(data, t) {
			if j.line == line {
				return t, j, nil
			}
		}
	}
	return cronTable{}, cronJob{}, notFound("no task %s", path)
}

// setCronEnabled comments a job line out behind the marker, or restores it.
func (s *linuxSystem) setCronEnabled(path string, enabled bool) (agentproto.Task, error) {
	s.cronMu.Lock()
	defer s.cronMu.Unlock()
	t, j, err := s.cronJobAt(path)
	if err != nil {
		return agentproto.Task{}, err
	}
	if j.enabled == enabled {
		return cronTask(t, j), nil
	}
	info, err := os.Stat(t.path)
	if err != nil {
		return agentproto.Task{}, fileError(t.path, err)
	}
	data, err := os.ReadFile(t.path)
	if err != nil {
		return agentproto.Task{}, fileError(t.path, err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	l := lines[j.line-1]
	if enabled {
		l = strings.TrimPrefix(l, cronDisabledMarker)
	} else {
		l = cronDisabledMarker + l
	}
	lines[j.line-1] = l
	table := writeTarget{path: t.path, mode: info.Mode().Perm(), old: info}
	if _, err := table.write(strings.NewReader(strings.Join(lines, "")), io.Discard); err != nil {
		return agentproto.Task{}, fileError(t.path, err)
	}
	j.enabled = enabled
	return cronTask(t, j), nil
}

// runCron starts a job's command in the background as the agent's user.
func runCron(j cronJob) (agentproto.Done, error) {
	cmd := exec.Command("/bin/sh", "-c", j.command)
	if err := cmd.Start(); err != nil {
		return agentproto.Done{}, failed("starting the command: %v", err)
	}
	go func() { _ = cmd.Wait() }() // reaps the child; its outcome is not reported
	return agentproto.Done{OK: true, Message: "started as process " + strconv.Itoa(cmd.Process.Pid) + " with the agent's user"}, nil
}

// cronHistory lists cron's journal lines that mention the command, newest first.
func (s *linuxSystem) cronHistory(ctx context.Context, j cronJob) ([]agentproto.TaskRun, error) {
	runs := []agentproto.TaskRun{}
	if !s.journald() {
		return runs, nil
	}
	out, err := s.run(ctx, "journalctl", "--output=json", "--no-pager", "--reverse", "--lines=1000",
		"SYSLOG_IDENTIFIER=CRON", "SYSLOG_IDENTIFIER=cron", "SYSLOG_IDENTIFIER=crond")
	if err != nil {
		return nil, err
	}
	entries, err := parseJournal(out)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if len(runs) == maxTaskRuns {
			break
		}
		if ev := e.event(false); strings.Contains(ev.Message, j.command) {
			runs = append(runs, agentproto.TaskRun{StartedAt: ev.Time, Result: "started", Message: ev.Message})
		}
	}
	return runs, nil
}

// timer is a systemd timer and the unit it activates.
type timer struct {
	unit      string
	activates string
}

// parseListTimers reads `systemctl list-timers --all --no-legend`: NEXT LEFT LAST PASSED
// UNIT ACTIVATES, where the dates hold spaces. The unit is the last word ending in .timer.
func parseListTimers(out []byte) []timer {
	var timers []timer
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		for i := len(f) - 1; i >= 0; i-- {
			if strings.HasSuffix(f[i], ".timer") {
				t := timer{unit: f[i]}
				if i+1 < len(f) {
					t.activates = f[i+1]
				}
				timers = append(timers, t)
				break
			}
		}
	}
	return timers
}

// timerTasks describes timers from one `systemctl show` of the timers and their services.
func timerTasks(timers []timer, show []map[string]string) []agentproto.Task {
	byID := map[string]map[string]string{}
	for _, b := range show {
		byID[b["Id"]] = b
	}
	tasks := make([]agentproto.Task, 0, len(timers))
	for _, t := range timers {
		p := byID[t.unit]
		if p == nil {
			continue
		}
		task := agentproto.Task{
			Path:      "timer/" + t.unit,
			Name:      t.unit,
			Kind:      kindTimer,
			Schedule:  timerSchedule(p["TimersCalendar"], p["TimersMonotonic"]),
			Command:   t.activates,
			Enabled:   p["ActiveState"] == "active",
			LastRunAt: systemdTime(p["LastTriggerUSec"]),
			NextRunAt: systemdTime(p["NextElapseUSecRealtime"]),
		}
		if svc := byID[t.activates]; svc != nil {
			task.LastResult = svc["Result"]
		}
		tasks = append(tasks, task)
	}
	return tasks
}

// timerSchedule shortens systemctl's "{ OnCalendar=*-*-* 00:00:00 ; next_elapse=... }"
// lines to their settings.
func timerSchedule(values ...string) string {
	var parts []string
	for _, v := range values {
		for _, line := range strings.Split(v, "\n") {
			line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "{"))
			if setting, _, _ := strings.Cut(line, " ;"); strings.TrimSpace(setting) != "" {
				parts = append(parts, strings.TrimSpace(setting))
			}
		}
	}
	return strings.Join(parts, "; ")
}

// systemdTime parses systemctl's "Mon 2024-01-01 00:00:00 UTC"; systemctl writes in the
// machine's zone, whose abbreviation time.Local knows. "n/a" and empty give the zero time.
func systemdTime(v string) time.Time {
	t, err := time.ParseInLocation("Mon 2006-01-02 15:04:05 MST", strings.TrimSpace(v), time.Local)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

func (s *linuxSystem) timerTasks(ctx context.Context) ([]agentproto.Task, error) {
	out, err := s.run(ctx, "systemctl", "list-timers", "--all", "--no-legend", "--no-pager")
	if err != nil {
		return nil, err
	}
	timers := parseListTimers(out)
	if len(timers) == 0 {
		return nil, nil
	}
	args := []string{"show", "--no-pager",
		"--property=Id,ActiveState,Result,TimersCalendar,TimersMonotonic,LastTriggerUSec,NextElapseUSecRealtime"}
	for _, t := range timers {
		args = append(args, t.unit)
		if t.activates != "" {
			args = append(args, t.activates)
		}
	}
	show, err := s.run(ctx, "systemctl", args...)
	if err != nil {
		return nil, err
	}
	return timerTasks(timers, parseShow(show)), nil
}

func (s *linuxSystem) tasks(ctx context.Context) ([]agentproto.Task, error) {
	tasks := s.cronTasks()
	if s.systemd() {
		timers, err := s.timerTasks(ctx)
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, timers...)
	}
	if tasks == nil {
		tasks = []agentproto.Task{}
	}
	sort.SliceStable(tasks, func(i, j int) bool { return tasks[i].Kind < tasks[j].Kind })
	return tasks, nil
}

// timerTask finds a timer by its task path.
func (s *linuxSystem) timerTask(ctx context.Context, path string) (agentproto.Task, error) {
	unit := strings.TrimPrefix(path, "timer/")
	if err := checkUnitName(unit); err != nil || !strings.HasSuffix(unit, ".timer") {
		return agentproto.Task{}, invalid("invalid timer task path %q", path)
	}
	if err := s.requireSystemd(); err != nil {
		return agentproto.Task{}, err
	}
	tasks, err := s.timerTasks(ctx)
	if err != nil {
		return agentproto.Task{}, err
	}
	for _, t := range tasks {
		if t.Path == path {
			return t, nil
		}
	}
	return agentproto.Task{}, notFound("no task %s", path)
}

func taskKind(path string) (string, error) {
	switch {
	case strings.HasPrefix(path, "cron/"):
		return kindCron, nil
	case strings.HasPrefix(path, "timer/"):
		return kindTimer, nil
	case path == "":
		return "", invalid("path is required")
	}
	return "", invalid("task path must start with cron/ or timer/: %q", path)
}

func (s *linuxSystem) task(ctx context.Context, path string) (agentproto.Task, error) {
	kind, err := taskKind(path)
	if err != nil {
		return agentproto.Task{}, err
	}
	if kind == kindTimer {
		return s.timerTask(ctx, path)
	}
	t, j, err := s.cronJobAt(path)
	if err != nil {
		return agentproto.Task{}, err
	}
	return cronTask(t, j), nil
}

func (s *linuxSystem) taskHistory(ctx context.Context, path string) ([]agentproto.TaskRun, error) {
	kind, err := taskKind(path)
	if err != nil {
		return nil, err
	}
	if kind == kindCron {
		_, j, err := s.cronJobAt(path)
		if err != nil {
			return nil, err
		}
		return s.cronHistory(ctx, j)
	}
	t, err := s.timerTask(ctx, path)
	if err != nil {
		return nil, err
	}
	return s.timerHistory(ctx, t.Command)
}

// systemd's catalog IDs of "unit started" and "unit failed" journal entries.
const (
	msgUnitStarted = "39f53479d3a045ac8e11786248231fbf"
	msgUnitFailed  = "be02cf6855d2428ba40df7e9d022f03d"
)

// timerHistory lists the runs of a timer's service: one per journal entry where systemd
// reports the service started (for a oneshot, finished) or failed, newest first.
func (s *linuxSystem) timerHistory(ctx context.Context, service string) ([]agentproto.TaskRun, error) {
	runs := []agentproto.TaskRun{}
	if service == "" || !s.journald() {
		return runs, nil
	}
	out, err := s.run(ctx, "journalctl", "--output=json", "--no-pager", "--reverse", "--lines=1000", "--unit="+service)
	if err != nil {
		return nil, err
	}
	entries, err := parseJournal(out)
	if err != nil {
		return nil, err
	}
	return timerRuns(entries), nil
}

func timerRuns(entries []journalEntry) []agentproto.TaskRun {
	runs := []agentproto.TaskRun{}
	for _, e := range entries {
		if len(runs) == maxTaskRuns {
			break
		}
		var result string
		switch e["MESSAGE_ID"] {
		case msgUnitStarted:
			result = "success"
		case msgUnitFailed:
			result = "failed"
		default:
			continue
		}
		ev := e.event(false)
		runs = append(runs, agentproto.TaskRun{StartedAt: ev.Time, Result: result, Message: ev.Message})
	}
	return runs
}

func (s *linuxSystem) runTask(ctx context.Context, path string) (agentproto.Done, error) {
	kind, err := taskKind(path)
	if err != nil {
		return agentproto.Done{}, err
	}
	if kind == kindCron {
		_, j, err := s.cronJobAt(path)
		if err != nil {
			return agentproto.Done{}, err
		}
		return runCron(j)
	}
	t, err := s.timerTask(ctx, path)
	if err != nil {
		return agentproto.Done{}, err
	}
	if t.Command == "" {
		return agentproto.Done{}, failed("timer %s activates no unit", t.Name)
	}
	// --no-block: a oneshot service would otherwise hold the call until it ends.
	if _, err := s.run(ctx, "systemctl", "--no-ask-password", "--no-block", "start", t.Command); err != nil {
		return agentproto.Done{}, err
	}
	return agentproto.Done{OK: true, Message: "started " + t.Command}, nil
}

func (s *linuxSystem) setTaskEnabled(ctx context.Context, path string, enabled bool) (agentproto.Task, error) {
	kind, err := taskKind(path)
	if err != nil {
		return agentproto.Task{}, err
	}
	if kind == kindCron {
		return s.setCronEnabled(path, enabled)
	}
	t, err := s.timerTask(ctx, path)
	if err != nil {
		return agentproto.Task{}, err
	}
	verb := "disable"
	if enabled {
		verb = "enable"
	}
	if _, err := s.run(ctx, "systemctl", "--no-ask-password", verb, "--now", t.Name); err != nil {
		return agentproto.Task{}, err
	}
	return s.timerTask(ctx, path)
}
