package agentproto

// CommandPolicyEvaluate checks a configuration policy's rules on the device (payload
// PolicyEvaluate, result PolicyEvaluateResult). A rule that cannot be checked fails with a
// message saying why; the command itself fails only when its payload is unreadable.
const CommandPolicyEvaluate = "policy_evaluate"

// Rule types of configuration policies.
const (
	RuleRequiredSoftware   = "required_software"
	RuleProhibitedSoftware = "prohibited_software"
	RuleDiskSpaceMinimum   = "disk_space_minimum"
	RuleOSVersion          = "os_version"
	RuleConfigCheck        = "config_check"
	RuleServiceRunning     = "service_running"
)

// Operators of a config_check rule.
const (
	ConfigEq       = "eq"
	ConfigNe       = "ne"
	ConfigContains = "contains"
	ConfigPresent  = "present"
	ConfigAbsent   = "absent"
)

// PolicyRule is one rule of a policy; which fields apply depends on Type.
type PolicyRule struct {
	Type string `json:"type"`
	// Name: required_software, prohibited_software (a package name), service_running (a unit).
	Name string `json:"name,omitempty"`
	// MinVersion: required_software (a package version in the manager's ordering) and
	// os_version (dotted numbers, compared part by part).
	MinVersion string `json:"minVersion,omitempty"`
	// MountPoint, MinFreeGB, MinFreePercent: disk_space_minimum (one of the two minimums).
	MountPoint     string   `json:"mountPoint,omitempty"`
	MinFreeGB      *float64 `json:"minFreeGb,omitempty"`
	MinFreePercent *float64 `json:"minFreePercent,omitempty"`
	// Path, Key, Expected, Operator: config_check of a key in a file of key=value,
	// "key value" or "key: value" lines.
	Path     string `json:"path,omitempty"`
	Key      string `json:"key,omitempty"`
	Expected string `json:"expected,omitempty"`
	Operator string `json:"operator,omitempty"`
}

// PolicyEvaluate is the payload of policy_evaluate.
type PolicyEvaluate struct {
	PolicyID string       `json:"policyId"`
	Rules    []PolicyRule `json:"rules"`
}

// PolicyRuleResult is the outcome of one rule.
type PolicyRuleResult struct {
	// Rule is the rule's index in the payload.
	Rule    int    `json:"rule"`
	Type    string `json:"type"`
	Passed  bool   `json:"passed"`
	Actual  string `json:"actual"`
	Message string `json:"message"`
}

// PolicyEvaluateResult is the Result of a completed policy_evaluate: one entry per rule, in order.
type PolicyEvaluateResult struct {
	Results []PolicyRuleResult `json:"results"`
}
