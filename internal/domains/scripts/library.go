package scripts

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"strconv"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

//go:embed library
var libraryFiles embed.FS

// LibraryScript is a script shipped with Gale: read-only, cloned into a tenant to be run
// (the system library) or to be started from (a template).
type LibraryScript struct {
	ID                      string             `json:"id" doc:"A stable name, e.g. linux-disk-usage."`
	Name                    string             `json:"name"`
	Description             string             `json:"description"`
	Category                string             `json:"category"`
	OSTypes                 []string           `json:"osTypes"`
	Language                string             `json:"language"`
	Content                 string             `json:"content"`
	Parameters              []ScriptParameter  `json:"parameters"`
	TimeoutSeconds          int                `json:"timeoutSeconds"`
	ExitCodeSeverityMapping map[string]*string `json:"exitCodeSeverityMapping,omitempty"`
	file                    string
}

func sev(s string) *string { return &s }

var linux = []string{OSLinux}

// systemLibrary is the read-only library of scripts every tenant can import.
var systemLibrary = []LibraryScript{
	{ID: "linux-disk-usage", Name: "Disk usage report", Category: "Maintenance", file: "system/disk-usage.sh",
		Description: "Filesystems by use and the largest directories; fails when a filesystem passes a threshold.",
		Parameters: []ScriptParameter{{Name: "TARGET_DIR", Type: ParamString, DefaultValue: "/", Label: "Directory to break down"},
			{Name: "THRESHOLD", Type: ParamNumber, DefaultValue: 90.0, Label: "Full above (percent)"},
			{Name: "TOP", Type: ParamNumber, DefaultValue: 10.0, Label: "Directories to list"}},
		ExitCodeSeverityMapping: map[string]*string{"1": sev("medium")}},
	{ID: "linux-top-processes", Name: "Top processes", Category: "Diagnostics", file: "system/top-processes.sh",
		Description: "The processes using the most CPU and memory.",
		Parameters:  []ScriptParameter{{Name: "COUNT", Type: ParamNumber, DefaultValue: 15.0}}},
	{ID: "linux-failed-services", Name: "Failed services", Category: "Diagnostics", file: "system/failed-services.sh",
		Description:             "Failed systemd units, or SysV services that are not running; fails when there are any.",
		ExitCodeSeverityMapping: map[string]*string{"1": sev("medium")}},
	{ID: "linux-pending-updates", Name: "Pending updates", Category: "Patching", file: "system/pending-updates.sh", TimeoutSeconds: 600,
		Description:             "Packages with an update waiting (apt, dnf, yum, zypper); fails when security updates wait.",
		ExitCodeSeverityMapping: map[string]*string{"1": sev("high"), "2": sev("low")}},
	{ID: "linux-clean-package-cache", Name: "Clean package cache and old journals", Category: "Maintenance",
		file: "system/clean-package-cache.sh", TimeoutSeconds: 900,
		Description: "Frees disk space: the package cache, unused packages and journal files older than JOURNAL_DAYS.",
		Parameters:  []ScriptParameter{{Name: "JOURNAL_DAYS", Type: ParamNumber, DefaultValue: 14.0}}},
	{ID: "linux-restart-service", Name: "Restart a service", Category: "Services", file: "system/restart-service.sh",
		Description: "Restarts a service (systemd or SysV) and shows its state; fails when it is not running afterwards.",
		Parameters:  []ScriptParameter{{Name: "SERVICE_NAME", Type: ParamString, Required: true, Label: "Service"}}},
	{ID: "linux-listening-ports", Name: "Listening ports", Category: "Security", file: "system/listening-ports.sh",
		Description: "TCP and UDP ports the machine listens on, with their processes."},
	{ID: "linux-recent-errors", Name: "Recent errors in the logs", Category: "Diagnostics", file: "system/recent-errors.sh",
		Description: "Errors from the journal (or /var/log) of the last hours.",
		Parameters: []ScriptParameter{{Name: "HOURS", Type: ParamNumber, DefaultValue: 24.0},
			{Name: "LINES_MAX", Type: ParamNumber, DefaultValue: 200.0}}},
	{ID: "linux-memory-summary", Name: "Memory summary", Category: "Diagnostics", file: "system/memory-summary.sh",
		Description: "Memory and swap, the largest processes, recent out-of-memory kills."},
	{ID: "linux-uptime-load", Name: "Uptime and load", Category: "Diagnostics", file: "system/uptime-load.sh",
		Description:             "Uptime, load per CPU and the last boots; fails when the load per CPU passes a limit.",
		Parameters:              []ScriptParameter{{Name: "MAX_LOAD_PER_CPU", Type: ParamNumber, DefaultValue: 2.0}},
		ExitCodeSeverityMapping: map[string]*string{"1": sev("medium")}},
	{ID: "linux-reboot-required", Name: "Reboot required", Category: "Patching", file: "system/reboot-required.sh",
		Description:             "Fails when the system asks for a reboot after updates, naming the packages.",
		ExitCodeSeverityMapping: map[string]*string{"1": sev("low")}},
	{ID: "linux-user-accounts", Name: "User accounts", Category: "Security", file: "system/user-accounts.sh",
		Description: "Accounts that can log in, administrators and recent logins."},
}

var templates = []LibraryScript{
	{ID: "bash-basic", Name: "Bash script", Category: "Templates", file: "templates/bash-basic.sh", Language: LangBash,
		Description: "Stops at the first failing command and says where.", OSTypes: []string{OSLinux, OSMacOS}},
	{ID: "bash-parameters", Name: "Bash script with parameters", Category: "Templates", file: "templates/bash-parameters.sh",
		Language:    LangBash,
		Description: "Reads a required and an optional parameter.", OSTypes: []string{OSLinux, OSMacOS},
		Parameters: []ScriptParameter{{Name: "TARGET", Type: ParamString, Required: true}, {Name: "DRY_RUN", Type: ParamBoolean, DefaultValue: true}}},
	{ID: "python-basic", Name: "Python script", Category: "Templates", file: "templates/python-basic.py", Language: LangPython,
		Description: "A main function with an exit code.", OSTypes: []string{OSLinux, OSMacOS, OSWindows},
		Parameters: []ScriptParameter{{Name: "TARGET", Type: ParamString, Required: true}}},
	{ID: "powershell-basic", Name: "PowerShell script", Category: "Templates", file: "templates/powershell-basic.ps1",
		Language: LangPowerShell, Description: "Stops at the first error and exits 1.", OSTypes: []string{OSWindows}},
	{ID: "health-check", Name: "Health check with graded results", Category: "Templates", file: "templates/health-check.sh",
		Language: LangSh, Description: "Exit 1 is a warning, 2 is critical, through the exit-code mapping.", OSTypes: linux,
		Parameters:              []ScriptParameter{{Name: "WARNING", Type: ParamNumber, DefaultValue: 85.0}, {Name: "CRITICAL", Type: ParamNumber, DefaultValue: 95.0}},
		ExitCodeSeverityMapping: map[string]*string{"1": sev("medium"), "2": sev("critical")}},
	{ID: "service-watchdog", Name: "Service watchdog", Category: "Templates", file: "templates/service-watchdog.sh", Language: LangSh,
		Description: "Starts a service when it is not running.", OSTypes: linux,
		Parameters: []ScriptParameter{{Name: "SERVICE_NAME", Type: ParamString, Required: true}}},
}

func init() {
	for _, list := range [][]LibraryScript{systemLibrary, templates} {
		for i := range list {
			l := &list[i]
			b, err := libraryFiles.ReadFile("library/" + l.file)
			if err != nil {
				panic(err)
			}
			l.Content = string(b)
			if l.Language == "" {
				l.Language = LangSh
			}
			if l.OSTypes == nil {
				l.OSTypes = linux
			}
			if l.TimeoutSeconds == 0 {
				l.TimeoutSeconds = DefaultTimeout
			}
			if l.Parameters == nil {
				l.Parameters = []ScriptParameter{}
			}
			if _, err := validateDefinition(l.input(l.Name)); err != nil {
				panic(fmt.Sprintf("scripts: library script %s: %v", l.ID, err))
			}
		}
	}
}

func (l LibraryScript) input(name string) ScriptInput {
	return ScriptInput{Name: name, Description: l.Description, OSTypes: l.OSTypes, Language: l.Language, Content: l.Content,
		Parameters: l.Parameters, TimeoutSeconds: l.TimeoutSeconds, ExitCodeSeverityMapping: l.ExitCodeSeverityMapping}
}

// SystemLibrary lists the system library.
func SystemLibrary() []LibraryScript { return systemLibrary }

// Templates lists the templates.
func Templates() []LibraryScript { return templates }

func find(list []LibraryScript, id string) (LibraryScript, bool) {
	for _, l := range list {
		if l.ID == id {
			return l, true
		}
	}
	return LibraryScript{}, false
}

// ScriptCopy names the copy a library script or template becomes.
type ScriptCopy struct {
	OrgID      string `json:"orgId,omitempty" format:"uuid" doc:"The organization of the copy; omitted by a partner caller: partner-wide."`
	PartnerID  string `json:"partnerId,omitempty" format:"uuid" doc:"System callers: the partner of a partner-wide copy."`
	Name       string `json:"name,omitempty" maxLength:"255" doc:"Default: the library script's name."`
	CategoryID string `json:"categoryId,omitempty" format:"uuid"`
}

// Import clones a system library script into the caller's tenant.
func (s *Service) Import(ctx context.Context, libraryID string, in ScriptCopy) (Script, error) {
	l, ok := find(systemLibrary, libraryID)
	if !ok {
		return Script{}, apperr.NotFound("library script")
	}
	return s.clone(ctx, l, in, "library:"+l.ID)
}

// FromTemplate creates a script from a template.
func (s *Service) FromTemplate(ctx context.Context, templateID string, in ScriptCopy) (Script, error) {
	l, ok := find(templates, templateID)
	if !ok {
		return Script{}, apperr.NotFound("template")
	}
	return s.clone(ctx, l, in, "template:"+l.ID)
}

func (s *Service) clone(ctx context.Context, l LibraryScript, in ScriptCopy, source string) (Script, error) {
	name := in.Name
	if name == "" {
		name = l.Name
	}
	d, err := validateDefinition(l.input(name))
	if err != nil {
		return Script{}, err
	}
	return s.create(ctx, in.OrgID, in.PartnerID, d, in.CategoryID, nil, source, "from "+source)
}

const versionColumns = `v.id, v.script_id, v.version, v.name, v.os_types, v.language, v.content, v.parameters, v.timeout_seconds,
	v.run_as, v.exit_code_mapping, v.note, v.created_by, v.created_at`

func scanVersion(row store.Scanner) (ScriptVersion, error) {
	var v ScriptVersion
	var osJSON, params string
	var mapping, by sql.NullString
	err := row.Scan(&v.ID, &v.ScriptID, &v.Version, &v.Name, &osJSON, &v.Language, &v.Content, &params, &v.TimeoutSeconds,
		&v.RunAs, &mapping, &v.Note, &by, &v.CreatedAt)
	if err != nil {
		return v, err
	}
	v.CreatedBy = store.StringPtr(by)
	return v, decodeDefinition(osJSON, params, mapping, &v.OSTypes, &v.Parameters, &v.ExitCodeSeverityMapping)
}

// Versions lists a page of a script's versions, newest first.
func (s *Service) Versions(ctx context.Context, scriptID string, page store.Page) ([]ScriptVersion, string, *int, error) {
	if _, err := s.Get(ctx, scriptID); err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	return store.List(ctx, s.db, store.ListQuery{Columns: versionColumns, From: " FROM script_versions v",
		Conds: []string{"v.script_id = " + a.Add(scriptID)}, Args: &a, SortKey: "v.version", SortID: "v.id", Desc: true,
		KeyArg: func(k string) (any, error) { return strconv.Atoi(k) }},
		page, scanVersion, func(v ScriptVersion) (string, string) { return strconv.Itoa(v.Version), v.ID })
}

// ScriptVersionInput saves a new version: the fields given replace the current ones.
type ScriptVersionInput struct {
	Content                 *string            `json:"content,omitempty" multiline:"true"`
	Parameters              []ScriptParameter  `json:"parameters,omitempty" maxItems:"64"`
	Language                *string            `json:"language,omitempty" enum:"bash,sh,python,powershell,cmd"`
	OSTypes                 []string           `json:"osTypes,omitempty" maxItems:"3"`
	TimeoutSeconds          *int               `json:"timeoutSeconds,omitempty" minimum:"1" maximum:"3600"`
	RunAs                   *string            `json:"runAs,omitempty" enum:"system,user,elevated"`
	ExitCodeSeverityMapping map[string]*string `json:"exitCodeSeverityMapping,omitempty"`
	Note                    string             `json:"note" minLength:"1" maxLength:"1000" multiline:"true" doc:"What changed, kept with the version."`
}

// SaveVersion saves a new version of a script from its current definition and the fields
// given; it always makes a version, with its note.
func (s *Service) SaveVersion(ctx context.Context, scriptID string, in ScriptVersionInput) (ScriptVersion, error) {
	var v ScriptVersion
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		sc, err := manageable(ctx, tx, access.ScopeFrom(ctx), scriptID)
		if err != nil {
			return err
		}
		next := ScriptInput{Name: sc.Name, Description: sc.Description, OSTypes: sc.OSTypes, Language: sc.Language, Content: sc.Content,
			Parameters: sc.Parameters, TimeoutSeconds: sc.TimeoutSeconds, RunAs: sc.RunAs, ExitCodeSeverityMapping: sc.ExitCodeSeverityMapping}
		if in.Content != nil {
			next.Content = *in.Content
		}
		if in.Parameters != nil {
			next.Parameters = in.Parameters
		}
		if in.Language != nil {
			next.Language = *in.Language
		}
		if in.OSTypes != nil {
			next.OSTypes = in.OSTypes
		}
		if in.TimeoutSeconds != nil {
			next.TimeoutSeconds = *in.TimeoutSeconds
		}
		if in.RunAs != nil {
			next.RunAs = *in.RunAs
		}
		if in.ExitCodeSeverityMapping != nil {
			next.ExitCodeSeverityMapping = in.ExitCodeSeverityMapping
		}
		d, err := validateDefinition(next)
		if err != nil {
			return err
		}
		after, err := s.save(ctx, tx, sc, d, "", nil, in.Note, false)
		if err != nil {
			return err
		}
		v, err = getVersion(ctx, tx, scriptID, after.Version)
		return err
	})
	if err != nil {
		return v, fmt.Errorf("save script version: %w", err)
	}
	return v, nil
}

func getVersion(ctx context.Context, q store.Querier, scriptID string, version int) (ScriptVersion, error) {
	v, err := scanVersion(q.QueryRowContext(ctx, `SELECT `+versionColumns+` FROM script_versions v WHERE v.script_id = $1 AND v.version = $2`,
		scriptID, version))
	if err != nil {
		return v, fmt.Errorf("load version %d of script %s: %w", version, scriptID, err)
	}
	return v, nil
}

// Rollback saves an old version's definition as a new version.
func (s *Service) Rollback(ctx context.Context, scriptID, versionID string) (Script, error) {
	var sc Script
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := manageable(ctx, tx, access.ScopeFrom(ctx), scriptID)
		if err != nil {
			return err
		}
		var a store.Args
		old, err := store.ByID(ctx, tx, "version", `SELECT `+versionColumns+` FROM script_versions v`, "v.id", versionID, &a,
			[]string{"v.script_id = " + a.Add(scriptID)}, scanVersion)
		if err != nil {
			return err
		}
		d := definition{Name: before.Name, Description: before.Description, OSTypes: old.OSTypes, Language: old.Language,
			Content: old.Content, Parameters: old.Parameters, Timeout: old.TimeoutSeconds, RunAs: old.RunAs, Mapping: old.ExitCodeSeverityMapping}
		sc, err = s.save(ctx, tx, before, d, "", nil, fmt.Sprintf("rolled back to version %d", old.Version), false)
		return err
	})
	if err != nil {
		return sc, fmt.Errorf("roll back script: %w", err)
	}
	return sc, nil
}

// ScriptUsage is what a script's executions add up to.
type ScriptUsage struct {
	ScriptID          string         `json:"scriptId" format:"uuid"`
	TotalExecutions   int            `json:"totalExecutions"`
	ByStatus          map[string]int `json:"byStatus"`
	SuccessRate       *float64       `json:"successRate" doc:"completed / ended executions, 0 to 1; null before any ended."`
	AverageDurationMs *int64         `json:"averageDurationMs" doc:"Of completed and failed executions."`
	Devices           int            `json:"devices" doc:"Distinct devices it ran on."`
	LastExecutedAt    *time.Time     `json:"lastExecutedAt"`
	Since             *time.Time     `json:"since" doc:"The window's start (query days); null: all time."`
}

// Usage adds up a script's executions in scope, over the last days (0: all).
func (s *Service) Usage(ctx context.Context, scriptID string, days int) (ScriptUsage, error) {
	scope := access.ScopeFrom(ctx)
	if _, err := s.scriptWithHistory(ctx, scope, scriptID); err != nil {
		return ScriptUsage{}, err
	}
	out := ScriptUsage{ScriptID: scriptID, ByStatus: map[string]int{}}
	var a store.Args
	conds := []string{"e.script_id = " + a.Add(scriptID), executionFilter(scope, &a)}
	if days > 0 {
		since := s.clock.Now().Add(-time.Duration(days) * 24 * time.Hour)
		out.Since = &since
		conds = append(conds, "e.created_at >= "+a.Add(since))
	}
	// One row per command status, whether it started and outcome: what an execution's status
	// is read from.
	type statusGroup struct {
		cmdStatus, outcome string
		started            bool
		n                  int
		sum, withDur       int64
	}
	groups, err := store.QueryAll(ctx, s.db, `SELECT c.status, c.started_at IS NOT NULL, COALESCE(e.outcome, ''), COUNT(*),
		COALESCE(SUM(c.duration_ms), 0), COUNT(c.duration_ms)
		FROM script_executions e`+devices.CommandJoin("e.command_id")+` WHERE `+store.Where(conds)+
		` GROUP BY c.status, c.started_at IS NOT NULL, COALESCE(e.outcome, '')`, a.Values(), func(row store.Scanner) (statusGroup, error) {
		var g statusGroup
		return g, row.Scan(&g.cmdStatus, &g.started, &g.outcome, &g.n, &g.sum, &g.withDur)
	})
	if err != nil {
		return out, fmt.Errorf("script usage: %w", err)
	}
	var durSum, durN int64
	for _, g := range groups {
		var at *time.Time
		if g.started {
			t := time.Time{}
			at = &t
		}
		status := executionStatus(devices.DeviceCommand{Status: g.cmdStatus, StartedAt: at}, g.outcome)
		out.ByStatus[status] += g.n
		out.TotalExecutions += g.n
		if status == StatusCompleted || status == StatusFailed {
			durSum, durN = durSum+g.sum, durN+g.withDur
		}
	}
	ended := out.ByStatus[StatusCompleted] + out.ByStatus[StatusFailed] + out.ByStatus[StatusTimeout]
	if ended > 0 {
		rate := float64(out.ByStatus[StatusCompleted]) / float64(ended)
		out.SuccessRate = &rate
	}
	if durN > 0 {
		avg := durSum / durN
		out.AverageDurationMs = &avg
	}
	if out.TotalExecutions == 0 {
		return out, nil
	}
	var last time.Time
	if err := s.db.QueryRowContext(ctx, `SELECT e.created_at FROM script_executions e WHERE `+store.Where(conds)+` ORDER BY e.id DESC LIMIT 1`,
		a.Values()...).Scan(&last); err != nil {
		return out, fmt.Errorf("script usage: %w", err)
	}
	last = last.UTC()
	out.LastExecutedAt = &last
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(DISTINCT e.device_id) FROM script_executions e WHERE `+store.Where(conds),
		a.Values()...).Scan(&out.Devices); err != nil {
		return out, fmt.Errorf("script usage: %w", err)
	}
	return out, nil
}
