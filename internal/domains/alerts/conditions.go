package alerts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/platform/apperr"
	"gale/internal/platform/jsonenc"
)

// Condition types.
const (
	CondThreshold     = "threshold"
	CondOffline       = "offline"
	CondAgentSilent   = "agent_silent"
	CondCommandFailed = "command_failed"
)

// Limits of rule documents.
const (
	maxDepth          = 3
	maxConditions     = 20
	maxDurationMin    = 1440
	maxCommandTypes   = 20
	defaultCmdWindow  = 60
	defaultCooldown   = 5
	maxCooldown       = 10080
	maxTemplateLength = 1000
)

var (
	metrics     = []string{"cpuPercent", "ramPercent", "diskPercent"}
	operators   = []string{"gt", "gte", "lt", "lte", "eq", "neq"}
	severities  = []string{"critical", "high", "medium", "low", "info"}
	targetTypes = []string{"all", "org", "site", "group", "device"}
	logics      = []string{"and", "or"}
)

// Condition is a leaf condition ({type, ...}) or a group ({logic, conditions}).
type Condition struct {
	Logic      string      `json:"logic,omitempty"`
	Conditions []Condition `json:"conditions,omitempty"`

	Type            string   `json:"type,omitempty"`
	Metric          string   `json:"metric,omitempty"`
	Operator        string   `json:"operator,omitempty"`
	Value           *float64 `json:"value,omitempty"`
	DurationMinutes *int     `json:"durationMinutes,omitempty"`
	CommandTypes    []string `json:"commandTypes,omitempty"`
}

// IsGroup reports whether c combines other conditions.
func (c Condition) IsGroup() bool { return c.Logic != "" || c.Conditions != nil }

// RuleTargets names the devices a rule watches.
type RuleTargets struct {
	Type string   `json:"type" enum:"all,org,site,group,device"`
	IDs  []string `json:"ids" doc:"Organization, site, group or device IDs; empty for all."`
}

// devicesTargets maps a rule's targets onto devices' vocabulary: all is the rule's
// organization (every organization of its partner for a partner-wide rule), org names some.
func (t RuleTargets) devicesTargets() devices.Targets {
	kinds := map[string]string{"all": devices.TargetOrganization, "org": devices.TargetOrganization, "site": devices.TargetSites,
		"group": devices.TargetGroups, "device": devices.TargetDevices}
	return devices.Targets{Type: kinds[t.Type], IDs: t.IDs}
}

// problems collects validation details.
type problems []apperr.Detail

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, apperr.Detail{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return &apperr.Error{Kind: apperr.KindInvalid, Code: apperr.CodeValidation, Message: "validation failed", Details: p}
}

// parseConditions decodes and validates a conditions document strictly: unknown fields,
// fields of another condition type, unknown metrics or operators, out-of-range durations and
// nesting deeper than three levels are refused.
func (s *Service) parseConditions(raw json.RawMessage, p *problems) Condition {
	var c Condition
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		p.add("conditions", "conditions are required")
		return c
	}
	if err := jsonenc.DecodeStrict(raw, &c); err != nil {
		p.add("conditions", "not a valid condition document: %s", strings.TrimPrefix(err.Error(), "json: "))
		return c
	}
	checkCondition(&c, "conditions", 1, int(s.opts.MetricsRetention/time.Minute), p)
	return c
}

// checkCondition validates c in place (filling defaults); maxWindow, when positive, bounds
// the window of threshold conditions (the metrics history kept).
func checkCondition(c *Condition, path string, depth, maxWindow int, p *problems) {
	if c.IsGroup() {
		if depth > maxDepth {
			p.add(path, "conditions nest at most %d levels deep", maxDepth)
			return
		}
		if c.Type != "" || c.Metric != "" || c.Operator != "" || c.Value != nil || c.DurationMinutes != nil || c.CommandTypes != nil {
			p.add(path, "a group has only logic and conditions")
		}
		if !slices.Contains(logics, c.Logic) {
			p.add(path+".logic", "use and or or")
		}
		if len(c.Conditions) == 0 || len(c.Conditions) > maxConditions {
			p.add(path+".conditions", "a group needs 1 to %d conditions", maxConditions)
		}
		for i := range c.Conditions {
			checkCondition(&c.Conditions[i], fmt.Sprintf("%s.conditions[%d]", path, i), depth+1, maxWindow, p)
		}
		return
	}
	duration := func(required bool, def int) {
		if c.DurationMinutes == nil {
			if required {
				p.add(path+".durationMinutes", "durationMinutes is required (0 to %d)", maxDurationMin)
				return
			}
			c.DurationMinutes = &def
			return
		}
		if *c.DurationMinutes < 0 || *c.DurationMinutes > maxDurationMin {
			p.add(path+".durationMinutes", "durationMinutes must be 0 to %d", maxDurationMin)
		}
	}
	onlyThreshold := func() {
		if c.Metric != "" || c.Operator != "" || c.Value != nil {
			p.add(path, "metric, operator and value belong to threshold conditions")
		}
	}
	switch c.Type {
	case CondThreshold:
		if !slices.Contains(metrics, c.Metric) {
			p.add(path+".metric", "use one of %s", strings.Join(metrics, ", "))
		}
		if !slices.Contains(operators, c.Operator) {
			p.add(path+".operator", "use one of %s", strings.Join(operators, ", "))
		}
		if c.Value == nil {
			p.add(path+".value", "value is required")
		} else if *c.Value < 0 || *c.Value > 100 {
			p.add(path+".value", "a percentage is 0 to 100")
		}
		duration(false, 0)
		if maxWindow > 0 && c.DurationMinutes != nil && *c.DurationMinutes > maxWindow {
			p.add(path+".durationMinutes", "the heartbeat metrics history is kept %d minutes (DEVICE_METRICS_RETENTION_HOURS); "+
				"a threshold window cannot be longer", maxWindow)
		}
		if c.CommandTypes != nil {
			p.add(path+".commandTypes", "commandTypes belong to command_failed conditions")
		}
	case CondOffline, CondAgentSilent:
		onlyThreshold()
		duration(true, 0)
		if c.CommandTypes != nil {
			p.add(path+".commandTypes", "commandTypes belong to command_failed conditions")
		}
	case CondCommandFailed:
		onlyThreshold()
		duration(false, defaultCmdWindow)
		if c.DurationMinutes != nil && *c.DurationMinutes == 0 {
			p.add(path+".durationMinutes", "the window of a command_failed condition is 1 to %d minutes", maxDurationMin)
		}
		if len(c.CommandTypes) > maxCommandTypes {
			p.add(path+".commandTypes", "at most %d command types", maxCommandTypes)
		}
		for i, t := range c.CommandTypes {
			if strings.TrimSpace(t) == "" || len(t) > 64 {
				p.add(fmt.Sprintf("%s.commandTypes[%d]", path, i), "a command type is 1 to 64 characters")
			}
		}
	case "":
		p.add(path+".type", "type is required: threshold, offline, agent_silent or command_failed (or a group with logic and conditions)")
	default:
		p.add(path+".type", "unknown condition type; use threshold, offline, agent_silent or command_failed")
	}
}

// checkTargets checks the shape of a rule's targets (checkTargetsExist checks what they name
// once the rule's owner is known): all names no IDs and org some; the rest as devices checks
// any targets.
func checkTargets(t *RuleTargets, p *problems) {
	if t.IDs == nil {
		t.IDs = []string{}
	}
	switch {
	case !slices.Contains(targetTypes, t.Type):
		p.add("targets.type", "type is one of %s", strings.Join(targetTypes, ", "))
	case t.Type == "all" && len(t.IDs) > 0:
		p.add("targets.ids", "type all names no IDs")
	case t.Type == "org" && len(t.IDs) == 0:
		p.add("targets.ids", "name 1 to %d organizations", devices.MaxTargetIDs)
	default:
		dt := t.devicesTargets()
		*p = append(*p, dt.CheckShape("")...)
	}
}

// compare applies op to observed and threshold.
func compare(op string, observed, threshold float64) bool {
	switch op {
	case "gt":
		return observed > threshold
	case "gte":
		return observed >= threshold
	case "lt":
		return observed < threshold
	case "lte":
		return observed <= threshold
	case "eq":
		return observed == threshold
	case "neq":
		return observed != threshold
	}
	return false
}
