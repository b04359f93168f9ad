// Package policies keeps configuration policies: rules a device must meet (software that must
// or must not be installed, free disk space, the OS version, a key in a configuration file, a
// running service), assigned to organizations, sites, groups or devices. The agents check the
// rules on schedule and on request (the policy_evaluate command); each assigned device is
// compliant, non_compliant, pending (not evaluated yet) or error. Entering non_compliant
// raises an alert (enforcement warn) and also runs the remediation script (enforce), after
// which the device is evaluated again.
package configpolicies

import (
	"time"

	"gale/internal/domains/devices"
	"gale/internal/wire/agentproto"
)

// Policy statuses.
const (
	StatusActive   = "active"
	StatusInactive = "inactive"
)

// Enforcement levels.
const (
	EnforceMonitor = "monitor"
	EnforceWarn    = "warn"
	EnforceEnforce = "enforce"
)

// Compliance states of a device under a policy.
const (
	StateCompliant    = "compliant"
	StateNonCompliant = "non_compliant"
	StatePending      = "pending"
	StateError        = "error"
)

// Events recorded on transitions.
const (
	EventNonCompliant = "policy.non_compliant"
	EventCompliant    = "policy.compliant"
)

// Limits.
const (
	maxNameLen          = 255
	maxDescriptionLen   = 4000
	maxRules            = 50
	minIntervalMinutes  = 15
	maxIntervalMinutes  = 10080
	defaultInterval     = 60
	maxTargetDevices    = 10_000
	maxRuleText         = 1024
	evaluateTimeout     = 120
	maxEvaluationErrLen = 1000
)

// PolicyRule is one rule; which fields apply depends on type (see the API notes).
type PolicyRule struct {
	Type           string   `json:"type" enum:"required_software,prohibited_software,disk_space_minimum,os_version,config_check,service_running"`
	Name           string   `json:"name,omitempty" maxLength:"1024" doc:"required_software and prohibited_software: the package name; service_running: the unit."`
	MinVersion     string   `json:"minVersion,omitempty" maxLength:"256" doc:"required_software: the lowest version accepted (package manager ordering); os_version: dotted numbers."`
	MountPoint     string   `json:"mountPoint,omitempty" maxLength:"1024" doc:"disk_space_minimum: an absolute path; default /."`
	MinFreeGB      *float64 `json:"minFreeGb,omitempty" doc:"disk_space_minimum: free gigabytes (GiB) required."`
	MinFreePercent *float64 `json:"minFreePercent,omitempty" doc:"disk_space_minimum: free percent required."`
	Path           string   `json:"path,omitempty" maxLength:"1024" doc:"config_check: the absolute path of the file."`
	Key            string   `json:"key,omitempty" maxLength:"1024" doc:"config_check: the key (key=value, key value or key: value lines; # comments)."`
	Expected       string   `json:"expected,omitempty" maxLength:"1024" doc:"config_check: the value eq, ne and contains compare with."`
	Operator       string   `json:"operator,omitempty" enum:"eq,ne,contains,present,absent" doc:"config_check."`
}

// Policy is the API view of a policy.
type Policy struct {
	ID                   string          `json:"id" format:"uuid"`
	PartnerID            string          `json:"partnerId" format:"uuid"`
	OrgID                *string         `json:"orgId" doc:"null: partner-wide, assigned within every organization of the partner."`
	Name                 string          `json:"name"`
	Description          string          `json:"description"`
	Status               string          `json:"status" enum:"active,inactive"`
	Enforcement          string          `json:"enforcement" enum:"monitor,warn,enforce"`
	CheckIntervalMinutes int             `json:"checkIntervalMinutes"`
	Rules                []PolicyRule    `json:"rules"`
	RemediationScriptID  *string         `json:"remediationScriptId"`
	Targets              devices.Targets `json:"targets"`
	CreatedBy            *string         `json:"createdBy"`
	CreatedAt            time.Time       `json:"createdAt"`
	UpdatedAt            time.Time       `json:"updatedAt"`
	LastEvaluatedAt      *time.Time      `json:"lastEvaluatedAt" doc:"When evaluations were last queued to the assigned devices."`
	NextEvaluationAt     *time.Time      `json:"nextEvaluationAt" doc:"When the schedule next queues evaluations; null while inactive."`
}

// PolicyInput is the body of a create and of a replace (PUT): absent optional fields take
// their defaults.
type PolicyInput struct {
	OrgID                string          `json:"orgId,omitempty" format:"uuid" doc:"The organization; omitted by a partner caller: partner-wide. A replace keeps the policy's own."`
	PartnerID            string          `json:"partnerId,omitempty" format:"uuid" doc:"System callers: the partner of a partner-wide policy."`
	Name                 string          `json:"name" minLength:"1" maxLength:"255"`
	Description          string          `json:"description,omitempty" maxLength:"4000" multiline:"true"`
	Status               string          `json:"status,omitempty" enum:"active,inactive" doc:"Default active."`
	Enforcement          string          `json:"enforcement,omitempty" enum:"monitor,warn,enforce" doc:"Default monitor."`
	CheckIntervalMinutes int             `json:"checkIntervalMinutes,omitempty" doc:"15 to 10080; default 60."`
	Rules                []PolicyRule    `json:"rules" minItems:"1" maxItems:"50"`
	RemediationScriptID  string          `json:"remediationScriptId,omitempty" format:"uuid"`
	Targets              devices.Targets `json:"targets"`
}

// PolicyPatch is the body of a PATCH: absent fields stay. remediationScriptId "" removes it.
type PolicyPatch struct {
	Name                 *string          `json:"name,omitempty" minLength:"1" maxLength:"255"`
	Description          *string          `json:"description,omitempty" maxLength:"4000" multiline:"true"`
	Status               *string          `json:"status,omitempty" enum:"active,inactive"`
	Enforcement          *string          `json:"enforcement,omitempty" enum:"monitor,warn,enforce"`
	CheckIntervalMinutes *int             `json:"checkIntervalMinutes,omitempty"`
	Rules                *[]PolicyRule    `json:"rules,omitempty" minItems:"1" maxItems:"50"`
	RemediationScriptID  *string          `json:"remediationScriptId,omitempty" doc:"A script ID, or an empty string to remove it."`
	Targets              *devices.Targets `json:"targets,omitempty"`
}

// PolicyRuleOutcome is what the agent found for one rule.
type PolicyRuleOutcome struct {
	Rule    int    `json:"rule" doc:"The rule's index in the policy's rules."`
	Type    string `json:"type"`
	Passed  bool   `json:"passed"`
	Actual  string `json:"actual"`
	Message string `json:"message"`
}

// PolicyDeviceCompliance is a device's compliance with one policy.
type PolicyDeviceCompliance struct {
	PolicyID               string              `json:"policyId" format:"uuid"`
	PolicyName             string              `json:"policyName"`
	Enforcement            string              `json:"enforcement"`
	DeviceID               string              `json:"deviceId" format:"uuid"`
	OrgID                  string              `json:"orgId" format:"uuid"`
	State                  string              `json:"state" enum:"compliant,non_compliant,pending,error"`
	Results                []PolicyRuleOutcome `json:"results" doc:"Per rule, from the last evaluation; empty before the first."`
	Error                  *string             `json:"error" doc:"state error: why the evaluation failed."`
	EvaluatedAt            *time.Time          `json:"evaluatedAt"`
	ChangedAt              time.Time           `json:"changedAt" doc:"When the state last changed."`
	EvaluationPending      bool                `json:"evaluationPending" doc:"An evaluation is queued or under way on the device."`
	AlertID                *string             `json:"alertId" doc:"The open alert raised when the device became non-compliant."`
	RemediationExecutionID *string             `json:"remediationExecutionId" doc:"The last remediation (GET /scripts/executions/{id})."`
	RemediatedAt           *time.Time          `json:"remediatedAt" doc:"When the last remediation ended."`
}

// PolicyStateCounts counts devices by compliance state.
type PolicyStateCounts struct {
	Compliant    int `json:"compliant"`
	NonCompliant int `json:"nonCompliant"`
	Pending      int `json:"pending"`
	Error        int `json:"error"`
	Total        int `json:"total"`
}

func (c *PolicyStateCounts) add(state string, n int) {
	switch state {
	case StateCompliant:
		c.Compliant += n
	case StateNonCompliant:
		c.NonCompliant += n
	case StatePending:
		c.Pending += n
	case StateError:
		c.Error += n
	}
	c.Total += n
}

// PolicyComplianceSummary is one policy's compliance.
type PolicyComplianceSummary struct {
	PolicyID          string   `json:"policyId" format:"uuid"`
	Name              string   `json:"name"`
	Status            string   `json:"status"`
	Enforcement       string   `json:"enforcement"`
	Compliant         int      `json:"compliant"`
	NonCompliant      int      `json:"nonCompliant"`
	Pending           int      `json:"pending"`
	Error             int      `json:"error"`
	Total             int      `json:"total"`
	CompliancePercent *float64 `json:"compliancePercent" doc:"Compliant devices over assigned devices, 0 to 100 with one decimal; null without assigned devices."`
}

// PolicyComplianceStats are the counts across the policies in scope.
type PolicyComplianceStats struct {
	Devices  PolicyStateCounts `json:"devices" doc:"Distinct devices, each by its worst state across its policies (non_compliant, then error, then pending)."`
	Policies PolicyCounts      `json:"policies"`
	Rows     PolicyStateCounts `json:"assignments" doc:"Policy and device pairs by state."`
}

// PolicyCounts counts policies by status and by overall state.
type PolicyCounts struct {
	Total        int `json:"total"`
	Active       int `json:"active"`
	Inactive     int `json:"inactive"`
	Compliant    int `json:"compliant" doc:"Active policies whose assigned devices are all compliant (at least one)."`
	NonCompliant int `json:"nonCompliant" doc:"Active policies with a non-compliant device."`
	Error        int `json:"error" doc:"Active policies with a device in error and none non-compliant."`
	Pending      int `json:"pending" doc:"Other active policies: devices not evaluated yet, or none assigned."`
}

// PolicyDeviceReport is every policy assigned to a device.
type PolicyDeviceReport struct {
	DeviceID string                   `json:"deviceId" format:"uuid"`
	State    string                   `json:"state" doc:"The worst state across the policies; compliant when none is assigned."`
	Policies []PolicyDeviceCompliance `json:"policies"`
}

// PolicyEvaluation is the answer of evaluate.
type PolicyEvaluation struct {
	Devices        int                `json:"devices" doc:"Devices the policy is assigned to."`
	Queued         int                `json:"queued" doc:"Evaluations queued now."`
	AlreadyPending int                `json:"alreadyPending" doc:"Devices with an evaluation already queued or under way."`
	Skipped        []PolicyDeviceNote `json:"skipped" doc:"Devices that cannot evaluate (another OS): their state is error."`
}

// PolicyDeviceNote names a device and why it was left out.
type PolicyDeviceNote struct {
	DeviceID string `json:"deviceId" format:"uuid"`
	Code     string `json:"code"`
	Reason   string `json:"reason"`
}

// PolicyRemediation is the answer of remediate.
type PolicyRemediation struct {
	Devices      int                `json:"devices" doc:"Non-compliant devices."`
	ExecutionIDs []string           `json:"executionIds" doc:"The remediation script's executions (GET /scripts/executions/{id})."`
	Skipped      []PolicyDeviceNote `json:"skipped"`
}

// PolicyAssignment is one target of a policy (partner API export).
type PolicyAssignment struct {
	PolicyID   string    `json:"policyId" format:"uuid"`
	OrgID      *string   `json:"orgId" doc:"The policy's organization; null for a partner-wide policy."`
	TargetType string    `json:"targetType" enum:"organization,sites,groups,devices"`
	TargetID   *string   `json:"targetId" doc:"null: every organization in the policy's scope."`
	AssignedAt time.Time `json:"assignedAt"`
}

// wireRules turns a policy's rules into the command's.
func wireRules(rules []PolicyRule) []agentproto.PolicyRule {
	out := make([]agentproto.PolicyRule, len(rules))
	for i, r := range rules {
		out[i] = agentproto.PolicyRule{Type: r.Type, Name: r.Name, MinVersion: r.MinVersion, MountPoint: r.MountPoint, MinFreeGB: r.MinFreeGB,
			MinFreePercent: r.MinFreePercent, Path: r.Path, Key: r.Key, Expected: r.Expected, Operator: r.Operator}
	}
	return out
}
