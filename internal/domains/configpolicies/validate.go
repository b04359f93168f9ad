package configpolicies

import (
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strings"

	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

var (
	packageName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+_:-]*$`)
	// packageVersion accepts the characters of Debian and RPM versions; the agent orders
	// them with the device's package manager.
	packageVersion = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+~:_^-]*$`)
	dottedVersion  = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*$`)
	serviceName    = regexp.MustCompile(`^[A-Za-z0-9@._:][A-Za-z0-9@._:-]*$`)
	configKey      = regexp.MustCompile(`^[^\s=:#]+$`)
)

// checker gathers field errors.
type checker struct{ details []apperr.Detail }

func (c *checker) fail(field, format string, args ...any) {
	c.details = append(c.details, apperr.Detail{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (c *checker) err() error {
	if len(c.details) == 0 {
		return nil
	}
	return apperr.InvalidFields(c.details)
}

// normalize fills the defaults of a policy's fields and checks them all.
func normalize(p *Policy) error {
	var c checker
	p.Name = strings.TrimSpace(p.Name)
	if n := len([]rune(p.Name)); n == 0 || n > maxNameLen {
		c.fail("name", "name is required, at most %d characters", maxNameLen)
	}
	if len([]rune(p.Description)) > maxDescriptionLen {
		c.fail("description", "at most %d characters", maxDescriptionLen)
	}
	if p.Status == "" {
		p.Status = StatusActive
	}
	if p.Status != StatusActive && p.Status != StatusInactive {
		c.fail("status", "status must be active or inactive")
	}
	if p.Enforcement == "" {
		p.Enforcement = EnforceMonitor
	}
	if !slices.Contains([]string{EnforceMonitor, EnforceWarn, EnforceEnforce}, p.Enforcement) {
		c.fail("enforcement", "enforcement must be monitor, warn or enforce")
	}
	if p.CheckIntervalMinutes == 0 {
		p.CheckIntervalMinutes = defaultInterval
	}
	if p.CheckIntervalMinutes < minIntervalMinutes || p.CheckIntervalMinutes > maxIntervalMinutes {
		c.fail("checkIntervalMinutes", "from %d to %d minutes", minIntervalMinutes, maxIntervalMinutes)
	}
	if len(p.Rules) == 0 || len(p.Rules) > maxRules {
		c.fail("rules", "1 to %d rules", maxRules)
	}
	for i := range p.Rules {
		checkRule(&c, fmt.Sprintf("rules[%d]", i), &p.Rules[i])
	}
	if p.RemediationScriptID != nil && !store.ValidID(*p.RemediationScriptID) {
		c.fail("remediationScriptId", "not a valid ID")
	}
	// Targets naming rows that are not the policy's are kept: they match nothing when evaluated.
	c.details = append(c.details, p.Targets.CheckShape(store.Deref(p.OrgID))...)
	return c.err()
}

// checkRule checks one rule: its own fields, and no field of another type.
func checkRule(c *checker, at string, r *PolicyRule) {
	allowed := map[string][]string{
		agentproto.RuleRequiredSoftware:   {"name", "minVersion"},
		agentproto.RuleProhibitedSoftware: {"name"},
		agentproto.RuleDiskSpaceMinimum:   {"mountPoint", "minFreeGb", "minFreePercent"},
		agentproto.RuleOSVersion:          {"minVersion"},
		agentproto.RuleConfigCheck:        {"path", "key", "expected", "operator"},
		agentproto.RuleServiceRunning:     {"name"},
	}
	own, ok := allowed[r.Type]
	if !ok {
		c.fail(at+".type", "type must be one of required_software, prohibited_software, disk_space_minimum, os_version, config_check, service_running")
		return
	}
	set := map[string]bool{"name": r.Name != "", "minVersion": r.MinVersion != "", "mountPoint": r.MountPoint != "",
		"minFreeGb": r.MinFreeGB != nil, "minFreePercent": r.MinFreePercent != nil, "path": r.Path != "", "key": r.Key != "",
		"expected": r.Expected != "", "operator": r.Operator != ""}
	for _, f := range []string{"name", "minVersion", "mountPoint", "minFreeGb", "minFreePercent", "path", "key", "expected", "operator"} {
		if set[f] && !slices.Contains(own, f) {
			c.fail(at+"."+f, "%s does not apply to a %s rule", f, r.Type)
		}
	}
	for f, v := range map[string]string{"name": r.Name, "minVersion": r.MinVersion, "mountPoint": r.MountPoint, "path": r.Path,
		"key": r.Key, "expected": r.Expected} {
		if len(v) > maxRuleText {
			c.fail(at+"."+f, "at most %d characters", maxRuleText)
		}
	}
	switch r.Type {
	case agentproto.RuleRequiredSoftware, agentproto.RuleProhibitedSoftware:
		if !packageName.MatchString(r.Name) || len(r.Name) > 255 {
			c.fail(at+".name", "a package name is required (letters, digits and . + _ : -)")
		}
		if r.MinVersion != "" && !packageVersion.MatchString(r.MinVersion) {
			c.fail(at+".minVersion", "not a package version")
		}
	case agentproto.RuleDiskSpaceMinimum:
		if r.MountPoint == "" {
			r.MountPoint = "/"
		}
		if !absolute(r.MountPoint) {
			c.fail(at+".mountPoint", "an absolute path without . or .. parts")
		}
		switch {
		case (r.MinFreeGB == nil) == (r.MinFreePercent == nil):
			c.fail(at+".minFreeGb", "give one of minFreeGb and minFreePercent")
		case r.MinFreeGB != nil && (math.IsNaN(*r.MinFreeGB) || *r.MinFreeGB <= 0 || *r.MinFreeGB > 1e6):
			c.fail(at+".minFreeGb", "more than 0, at most 1000000")
		case r.MinFreePercent != nil && (math.IsNaN(*r.MinFreePercent) || *r.MinFreePercent <= 0 || *r.MinFreePercent > 100):
			c.fail(at+".minFreePercent", "more than 0, at most 100")
		}
	case agentproto.RuleOSVersion:
		if !dottedVersion.MatchString(r.MinVersion) {
			c.fail(at+".minVersion", "a version of dotted numbers is required, like 22.04")
		}
	case agentproto.RuleConfigCheck:
		if !absolute(r.Path) {
			c.fail(at+".path", "an absolute path without . or .. parts is required")
		}
		if !configKey.MatchString(r.Key) {
			c.fail(at+".key", "a key is required, without spaces, =, : or #")
		}
		switch r.Operator {
		case agentproto.ConfigEq, agentproto.ConfigNe, agentproto.ConfigContains:
			if r.Expected == "" {
				c.fail(at+".expected", "expected is required with %s", r.Operator)
			}
		case agentproto.ConfigPresent, agentproto.ConfigAbsent:
			if r.Expected != "" {
				c.fail(at+".expected", "expected does not apply to %s", r.Operator)
			}
		default:
			c.fail(at+".operator", "operator must be eq, ne, contains, present or absent")
		}
		if strings.ContainsAny(r.Expected, "\r\n") {
			c.fail(at+".expected", "one line")
		}
	case agentproto.RuleServiceRunning:
		if !serviceName.MatchString(r.Name) || len(r.Name) > 255 {
			c.fail(at+".name", "a service name is required (letters, digits and @ . _ : -)")
		}
	}
}

// absolute reports whether p is an absolute, clean path.
func absolute(p string) bool {
	return strings.HasPrefix(p, "/") && path.Clean(p) == p && !strings.ContainsAny(p, "\x00\r\n")
}
