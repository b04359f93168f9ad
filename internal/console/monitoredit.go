package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"gale/internal/domains/monitors"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// monitorTypeOrder is the order the form offers the kinds of monitors in.
var monitorTypeOrder = []string{agentproto.MonitorICMPPing, agentproto.MonitorTCPPort, agentproto.MonitorHTTPCheck,
	agentproto.MonitorDNSCheck, agentproto.MonitorServiceCheck}

// opsChoice is an option of a select: its value and what it says.
type opsChoice struct{ Value, Label string }

// monitorConditions are the conditions an alert rule may have, as the form names them.
var monitorConditions = []opsChoice{{monitors.ConditionOffline, "Offline"}, {monitors.ConditionDegraded, "Degraded"},
	{monitors.ConditionResponseTimeGT, "Slower than (ms)"}, {monitors.ConditionConsecutiveFailures, "More failures in a row than"}}

// opsSeverities are the severities, most urgent first.
var opsSeverities = []string{"critical", "high", "medium", "low", "info"}

// monitorRuleRows is how many alert rule rows the form shows at least; it shows one or two
// more than a monitor has, up to the API's limit.
const monitorRuleRows = 3

// monitorForm is a monitor's editor, new or existing, as typed.
type monitorForm struct {
	// ID is the monitor edited, "" for a new one; OrgID its organization.
	ID, OrgID string
	// Saved is the monitor's name as it stands.
	Saved string
	// ChooseOrg asks first which organization a new monitor is for (partner and system users
	// without an organization in the switcher).
	ChooseOrg bool
	// OrgLocked tells an organization the user cannot choose another of (their own, or the
	// switcher's).
	OrgLocked bool
	Name      string
	Type      string
	Target    string
	SiteID    string
	// The type-specific settings, as typed.
	Port, Method, ExpectedStatus, ExpectedBody string
	RecordType, ExpectedValue                  string
	ServiceKind, DeviceID                      string
	DegradedResponseMs                         string
	Interval, Timeout                          string
	Enabled                                    bool
	Rules                                      []ruleRow
	Types                                      []opsChoice
	Conditions                                 []opsChoice
	Severities                                 []string
	// Sites and Devices are the organization's, to run the check from and for a service check.
	Sites, Devices []targetChoice
	Error          *apperr.Error
}

// ruleRow is one alert rule row of the form; Condition "" is a blank row.
type ruleRow struct {
	// N numbers the row from 1, for its labels.
	N                                            int
	ID, Condition, Threshold, Severity, Cooldown string
}

// New tells the form of a new monitor.
func (f monitorForm) New() bool { return f.ID == "" }

// Action is where the form posts.
func (f monitorForm) Action() string {
	if f.New() {
		return "/monitors"
	}
	return "/monitors/" + f.ID
}

func (c *Console) monitorNew(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "create-monitor"); err != nil {
		return err
	}
	f := monitorForm{Type: agentproto.MonitorICMPPing, Interval: strconv.Itoa(monitors.DefaultInterval),
		Timeout: strconv.Itoa(monitors.DefaultTimeout), Enabled: true, Method: "GET", RecordType: "A",
		ServiceKind: agentproto.ServiceBySystemd, Rules: []ruleRow{{Condition: monitors.ConditionOffline, Severity: "high"}}}
	return c.monitorEditor(w, r, http.StatusOK, f)
}

func (c *Console) monitorEdit(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "update-monitor"); err != nil {
		return err
	}
	m, err := c.Monitors.Get(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	return c.monitorEditor(w, r, http.StatusOK, monitorFormOf(m))
}

// monitorFormOf is the form filled in with a monitor as it stands.
func monitorFormOf(m monitors.Monitor) monitorForm {
	cfg := m.Config
	f := monitorForm{ID: m.ID, OrgID: m.OrgID, Saved: m.Name, Name: m.Name, Type: m.Type, Target: m.Target, SiteID: store.Deref(m.SiteID),
		Method: cfg.Method, ExpectedBody: cfg.ExpectedBody, RecordType: cfg.RecordType, ExpectedValue: cfg.ExpectedValue,
		ServiceKind: cfg.ServiceKind, DeviceID: cfg.DeviceID, Interval: strconv.Itoa(m.IntervalSeconds),
		Timeout: strconv.Itoa(m.TimeoutSeconds), Enabled: m.Enabled}
	if cfg.Port > 0 {
		f.Port = strconv.Itoa(cfg.Port)
	}
	if cfg.DegradedResponseMs > 0 {
		f.DegradedResponseMs = strconv.Itoa(cfg.DegradedResponseMs)
	}
	codes := make([]string, len(cfg.ExpectedStatus))
	for i, s := range cfg.ExpectedStatus {
		codes[i] = strconv.Itoa(s)
	}
	f.ExpectedStatus = strings.Join(codes, ", ")
	for _, rule := range m.AlertRules {
		row := ruleRow{ID: rule.ID, Condition: rule.Condition, Severity: rule.Severity}
		if rule.Threshold != nil {
			row.Threshold = strconv.FormatFloat(*rule.Threshold, 'f', -1, 64)
		}
		if rule.CooldownMinutes != nil {
			row.Cooldown = strconv.Itoa(*rule.CooldownMinutes)
		}
		f.Rules = append(f.Rules, row)
	}
	return f
}

// monitorEditor shows the form, with the organization's sites and devices to choose from.
func (c *Console) monitorEditor(w http.ResponseWriter, r *http.Request, status int, f monitorForm) error {
	if f.New() {
		f.OrgID, f.OrgLocked = c.opsFormOrg(r)
		f.ChooseOrg = f.OrgID == ""
	}
	if f.OrgID != "" {
		choices, err := c.targetChoices(r, f.OrgID)
		if err != nil {
			return err
		}
		f.Sites, f.Devices = choices.Sites, choices.Devices
	}
	for _, t := range monitorTypeOrder {
		f.Types = append(f.Types, opsChoice{t, monitorTypes[t]})
	}
	f.Conditions, f.Severities = monitorConditions, opsSeverities
	for rows := min(monitors.MaxAlertRules, max(monitorRuleRows, len(f.Rules)+1)); len(f.Rules) < rows; {
		f.Rules = append(f.Rules, ruleRow{Severity: "high"})
	}
	for i := range f.Rules {
		f.Rules[i].N = i + 1
	}
	title := "New monitor"
	if !f.New() {
		title = "Edit " + f.Saved
	}
	return c.render(w, r, status, "monitor-edit", "", view{Title: title, Section: "monitors", Data: f})
}

// opsFormOrg is the organization a new item's form is for, and whether it is fixed: the user's
// own, else the switcher's, else the one the form's first step chose (orgId). "" while a
// partner or system user has to choose.
func (c *Console) opsFormOrg(r *http.Request) (string, bool) {
	if p := access.PrincipalFrom(r.Context()); p.Scope.Level == access.LevelOrganization {
		return p.Scope.OrgID, true
	}
	if id := c.currentOrg(r); id != "" {
		return id, true
	}
	if id := r.FormValue("orgId"); store.ValidID(id) {
		return id, false
	}
	return "", false
}

// readMonitorForm reads what the form sent; id and org are the monitor's when it exists.
func readMonitorForm(form url.Values, id, org string) monitorForm {
	f := monitorForm{ID: id, OrgID: org, Name: form.Get("name"), Type: form.Get("type"), Target: form.Get("target"),
		SiteID: form.Get("siteId"), Port: form.Get("config.port"), Method: form.Get("config.method"),
		ExpectedStatus: form.Get("config.expectedStatus"), ExpectedBody: form.Get("config.expectedBody"),
		RecordType: form.Get("config.recordType"), ExpectedValue: form.Get("config.expectedValue"),
		ServiceKind: form.Get("config.serviceKind"), DeviceID: form.Get("config.deviceId"),
		DegradedResponseMs: form.Get("config.degradedResponseMs"), Interval: form.Get("intervalSeconds"),
		Timeout: form.Get("timeoutSeconds"), Enabled: form.Get("enabled") != ""}
	for i := range monitors.MaxAlertRules {
		key := func(name string) string { return fmt.Sprintf("alertRules[%d].%s", i, name) }
		row := ruleRow{ID: form.Get(key("id")), Condition: form.Get(key("condition")), Threshold: strings.TrimSpace(form.Get(key("threshold"))),
			Severity: form.Get(key("severity")), Cooldown: strings.TrimSpace(form.Get(key("cooldownMinutes")))}
		if row.Condition != "" {
			f.Rules = append(f.Rules, row)
		}
	}
	return f
}

// optionalInt reads a whole number field; empty is nil.
func optionalInt(field, value, want string) (*int, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		return nil, nil
	}
	n, err := strconv.Atoi(value)
	if err != nil {
		return nil, apperr.Invalid(field, want)
	}
	return &n, nil
}

// config is the monitor's configuration: base (the monitor's as it stands) with the
// settings the form shows replaced; the service keeps those of the monitor's type.
// monitorSettings are the form's settings as the service takes them.
type monitorSettings struct {
	config            agentproto.MonitorConfig
	rules             []monitors.MonitorAlertRule
	interval, timeout *int
}

// settings reads the form's settings, over base: what the form does not show of the
// monitor's configuration.
func (f monitorForm) settings(base agentproto.MonitorConfig) (s monitorSettings, err error) {
	if s.config, err = f.config(base); err != nil {
		return s, err
	}
	if s.rules, err = f.rules(); err != nil {
		return s, err
	}
	s.interval, s.timeout, err = f.timing()
	return s, err
}

func (f monitorForm) config(base agentproto.MonitorConfig) (agentproto.MonitorConfig, error) {
	cfg := base
	slow, err := optionalInt("config.degradedResponseMs", f.DegradedResponseMs, "a whole number of milliseconds, or empty for none")
	if err != nil {
		return cfg, err
	}
	cfg.DegradedResponseMs = 0
	if slow != nil {
		cfg.DegradedResponseMs = *slow
	}
	switch f.Type {
	case agentproto.MonitorTCPPort:
		port, err := optionalInt("config.port", f.Port, "a port from 1 to 65535")
		if err != nil {
			return cfg, err
		}
		cfg.Port = 0
		if port != nil {
			cfg.Port = *port
		}
	case agentproto.MonitorHTTPCheck:
		cfg.ExpectedStatus = nil
		for _, s := range strings.FieldsFunc(f.ExpectedStatus, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' }) {
			n, err := strconv.Atoi(s)
			if err != nil {
				return cfg, apperr.Invalid("config.expectedStatus", "status codes such as 200, 301 (empty: any status below 400)")
			}
			cfg.ExpectedStatus = append(cfg.ExpectedStatus, n)
		}
		cfg.Method, cfg.ExpectedBody = f.Method, f.ExpectedBody
	case agentproto.MonitorDNSCheck:
		cfg.RecordType, cfg.ExpectedValue = f.RecordType, strings.TrimSpace(f.ExpectedValue)
	case agentproto.MonitorServiceCheck:
		cfg.ServiceKind, cfg.DeviceID = f.ServiceKind, f.DeviceID
	}
	return cfg, nil
}

// rules are the alert rules of the rows filled in.
func (f monitorForm) rules() ([]monitors.MonitorAlertRule, error) {
	out := []monitors.MonitorAlertRule{}
	for i, row := range f.Rules {
		rule := monitors.MonitorAlertRule{ID: row.ID, Condition: row.Condition, Severity: row.Severity}
		if row.Threshold != "" {
			v, err := strconv.ParseFloat(row.Threshold, 64)
			if err != nil {
				return nil, apperr.Invalid(fmt.Sprintf("alertRules[%d].threshold", i), "a number")
			}
			rule.Threshold = &v
		}
		cooldown, err := optionalInt(fmt.Sprintf("alertRules[%d].cooldownMinutes", i), row.Cooldown, "a whole number of minutes")
		if err != nil {
			return nil, err
		}
		rule.CooldownMinutes = cooldown
		out = append(out, rule)
	}
	return out, nil
}

// timing reads the interval and the time limit; empty is the API's default.
func (f monitorForm) timing() (interval, timeout *int, err error) {
	if interval, err = optionalInt("intervalSeconds", f.Interval, "a whole number of seconds from 10 to 86400"); err != nil {
		return nil, nil, err
	}
	timeout, err = optionalInt("timeoutSeconds", f.Timeout, "a whole number of seconds from 1 to 300")
	return interval, timeout, err
}

func (c *Console) monitorCreate(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "create-monitor"); err != nil {
		return err
	}
	f := readMonitorForm(r.PostForm, "", "")
	m, err := func() (monitors.Monitor, error) {
		s, err := f.settings(agentproto.MonitorConfig{})
		if err != nil {
			return monitors.Monitor{}, err
		}
		return c.Monitors.Create(ctx, monitors.MonitorInput{OrgID: r.PostForm.Get("orgId"), SiteID: f.SiteID, Name: f.Name, Type: f.Type,
			Target: f.Target, Config: &s.config, IntervalSeconds: s.interval, TimeoutSeconds: s.timeout, Enabled: &f.Enabled, AlertRules: s.rules})
	}()
	if err != nil {
		return c.monitorRefused(w, r, f, err)
	}
	http.Redirect(w, r, "/monitors/"+m.ID, http.StatusSeeOther)
	return nil
}

// monitorUpdate saves the form as the monitor's whole definition, as a PATCH of every field
// does; the settings the form does not show (ping count, HTTP headers...) stay.
func (c *Console) monitorUpdate(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "update-monitor"); err != nil {
		return err
	}
	before, err := c.Monitors.Get(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	f := readMonitorForm(r.PostForm, before.ID, before.OrgID)
	f.Saved = before.Name
	_, err = func() (monitors.Monitor, error) {
		s, err := f.settings(before.Config)
		if err != nil {
			return monitors.Monitor{}, err
		}
		return c.Monitors.Update(ctx, before.ID, monitors.MonitorUpdate{SiteID: &f.SiteID, Name: &f.Name, Type: &f.Type, Target: &f.Target,
			Config: &s.config, IntervalSeconds: s.interval, TimeoutSeconds: s.timeout, Enabled: &f.Enabled, AlertRules: &s.rules})
	}()
	if err != nil {
		return c.monitorRefused(w, r, f, err)
	}
	http.Redirect(w, r, "/monitors/"+before.ID, http.StatusSeeOther)
	return nil
}

// monitorRefused shows the form again with the API's refusal; another error is the error
// page.
func (c *Console) monitorRefused(w http.ResponseWriter, r *http.Request, f monitorForm, err error) error {
	ae := formRefusal(err)
	if ae == nil {
		return err
	}
	f.Error = ae
	return c.monitorEditor(w, r, httpapi.StatusOf(ae), f)
}
