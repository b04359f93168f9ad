// Package automations runs work on devices by itself: an automation has a trigger (a cron
// schedule, a domain event, a signed inbound webhook, or only a technician's request),
// optional conditions each target device must meet, and ordered actions (run a script, send
// a device command, notify channels, raise an alert) over its targets (devices, groups,
// sites, organizations). Each firing is a run with one step per action and device; a run
// ends when all its steps have ended, as completed, failed or partial.
package automations

import (
	"time"

	"gale/internal/domains/devices"
)

// Trigger types.
const (
	TriggerSchedule = "schedule"
	TriggerEvent    = "event"
	TriggerWebhook  = "webhook"
	TriggerManual   = "manual"
)

// Action types.
const (
	ActionRunScript   = "run_script"
	ActionRunCommand  = "run_command"
	ActionNotify      = "notify"
	ActionCreateAlert = "create_alert"
)

// What a run does when a step of an action fails.
const (
	OnFailureStop     = "stop"
	OnFailureContinue = "continue"
	OnFailureNotify   = "notify"
)

// Run statuses.
const (
	RunRunning   = "running"
	RunCompleted = "completed"
	RunFailed    = "failed"
	RunPartial   = "partial"
)

// Step statuses: running until its work ended; skipped when the device was left out on
// purpose (another OS than the script's).
const (
	StepRunning   = "running"
	StepCompleted = "completed"
	StepFailed    = "failed"
	StepSkipped   = "skipped"
)

// How a run was started (Run.TriggeredBy).
const (
	StartedBySchedule = "schedule"
	StartedByEvent    = "event"
	StartedByWebhook  = "webhook"
	StartedByTrigger  = "trigger"
	StartedByRun      = "run"
)

// Events an automation run records.
const (
	EventStarted   = "automation.started"
	EventCompleted = "automation.completed"
	EventFailed    = "automation.failed"
)

// Limits.
const (
	maxNameLen        = 255
	maxDescriptionLen = 4000
	maxActions        = 20
	maxConditions     = 20
	maxChannels       = 20
	// maxTargetDevices bounds the devices one run acts on; device actions go out in chunks
	// of chunkDevices, each in a transaction of its own: on SQLite a transaction holds the
	// one writer, and 100 devices' work keeps that short enough for heartbeats waiting behind
	// it to stay prompt.
	maxTargetDevices = 10_000
	chunkDevices     = 100
	// maxChainDepth bounds chains of automations triggering one another through events.
	maxChainDepth = 5
	// maxOutputLen bounds the output a step keeps of its script or command.
	maxOutputLen = 4000
	maxErrorLen  = 1000
)

// AutomationTrigger is what starts an automation.
type AutomationTrigger struct {
	Type string `json:"type" enum:"schedule,event,webhook,manual"`
	// Cron and Timezone: schedule triggers.
	Cron     string `json:"cron,omitempty" maxLength:"100" doc:"schedule: five fields (minute hour day-of-month month day-of-week)."`
	Timezone string `json:"timezone,omitempty" maxLength:"64" doc:"schedule: an IANA time zone the cron reads in; default UTC."`
	// EventType and Filter: event triggers.
	EventType string            `json:"eventType,omitempty" maxLength:"100" doc:"event: the domain event type (see the API notes for the list)."`
	Filter    map[string]string `json:"filter,omitempty" doc:"event: fields the event must match exactly: orgId, siteId, deviceId, severity, status, scriptId, automationId."`
	// WebhookURL and SecretHint are set by the server for webhook triggers; Secret only in
	// the answer that created the secret.
	WebhookURL string `json:"webhookUrl,omitempty" readOnly:"true" doc:"webhook: where to POST a signed call."`
	Secret     string `json:"secret,omitempty" readOnly:"true" doc:"webhook: the signing secret, shown once when created."`
	SecretHint string `json:"secretHint,omitempty" readOnly:"true"`
}

// AutomationCondition is a test a target device must pass for the run to act on it.
type AutomationCondition struct {
	Field    string   `json:"field" enum:"osType,status,tag,hostname,siteId"`
	Operator string   `json:"operator" enum:"eq,neq,in,notIn,contains"`
	Value    string   `json:"value,omitempty" maxLength:"255" doc:"eq, neq and contains."`
	Values   []string `json:"values,omitempty" maxItems:"100" doc:"in and notIn."`
}

// AutomationAction is one thing a run does, in order.
type AutomationAction struct {
	Type string `json:"type" enum:"run_script,run_command,notify,create_alert"`
	// ScriptID and Parameters: run_script.
	ScriptID   string         `json:"scriptId,omitempty" format:"uuid"`
	Parameters map[string]any `json:"parameters,omitempty"`
	// Command: run_command.
	Command *devices.CommandInput `json:"command,omitempty" doc:"run_command: a device command (type, payload, timeoutSeconds)."`
	// ChannelIDs, Subject and Message: notify; Severity, Title and Message: create_alert.
	ChannelIDs []string `json:"channelIds,omitempty" maxItems:"20"`
	Subject    string   `json:"subject,omitempty" maxLength:"500"`
	Message    string   `json:"message,omitempty" maxLength:"4000"`
	Severity   string   `json:"severity,omitempty" enum:"critical,high,medium,low,info"`
	Title      string   `json:"title,omitempty" maxLength:"500"`
}

// Automation is the API view of an automation.
type Automation struct {
	ID               string                `json:"id" format:"uuid"`
	PartnerID        string                `json:"partnerId" format:"uuid"`
	OrgID            *string               `json:"orgId" doc:"null: partner-wide, acting in every organization of the partner."`
	Name             string                `json:"name"`
	Description      string                `json:"description"`
	Enabled          bool                  `json:"enabled"`
	Trigger          AutomationTrigger     `json:"trigger"`
	Conditions       []AutomationCondition `json:"conditions"`
	Actions          []AutomationAction    `json:"actions"`
	Targets          *devices.Targets      `json:"targets"`
	OnFailure        string                `json:"onFailure" enum:"stop,continue,notify"`
	NotifyChannelIDs []string              `json:"notifyChannelIds"`
	CreatedBy        *string               `json:"createdBy"`
	CreatedAt        time.Time             `json:"createdAt"`
	UpdatedAt        time.Time             `json:"updatedAt"`
	LastRunAt        *time.Time            `json:"lastRunAt"`
	NextRunAt        *time.Time            `json:"nextRunAt" doc:"schedule: the next occurrence; null otherwise or when disabled."`
}

// AutomationInput is the body of a create.
type AutomationInput struct {
	OrgID            string                `json:"orgId,omitempty" format:"uuid" doc:"The organization; omitted by a partner caller: partner-wide."`
	PartnerID        string                `json:"partnerId,omitempty" format:"uuid" doc:"System callers: the partner of a partner-wide automation."`
	Name             string                `json:"name" minLength:"1" maxLength:"255"`
	Description      string                `json:"description,omitempty" maxLength:"4000"`
	Enabled          *bool                 `json:"enabled,omitempty" doc:"Default true."`
	Trigger          AutomationTrigger     `json:"trigger"`
	Conditions       []AutomationCondition `json:"conditions,omitempty" maxItems:"20"`
	Actions          []AutomationAction    `json:"actions" minItems:"1" maxItems:"20"`
	Targets          *devices.Targets      `json:"targets,omitempty"`
	OnFailure        string                `json:"onFailure,omitempty" enum:"stop,continue,notify" doc:"Default stop."`
	NotifyChannelIDs []string              `json:"notifyChannelIds,omitempty" maxItems:"20" doc:"onFailure notify: the channels told of a failed run."`
}

// AutomationUpdate is the body of a PATCH: absent fields stay.
type AutomationUpdate struct {
	Name             *string                `json:"name,omitempty" minLength:"1" maxLength:"255"`
	Description      *string                `json:"description,omitempty" maxLength:"4000"`
	Enabled          *bool                  `json:"enabled,omitempty"`
	Trigger          *AutomationTrigger     `json:"trigger,omitempty"`
	Conditions       *[]AutomationCondition `json:"conditions,omitempty" maxItems:"20"`
	Actions          *[]AutomationAction    `json:"actions,omitempty" minItems:"1" maxItems:"20"`
	Targets          *devices.Targets       `json:"targets,omitempty"`
	OnFailure        *string                `json:"onFailure,omitempty" enum:"stop,continue,notify"`
	NotifyChannelIDs *[]string              `json:"notifyChannelIds,omitempty" maxItems:"20"`
	// RotateSecret makes a new signing secret for a webhook trigger (shown in the answer).
	RotateSecret bool `json:"rotateSecret,omitempty"`
}

// AutomationRunStart is the body of trigger and run: a payload as a webhook or event would bring.
type AutomationRunStart struct {
	Payload map[string]any `json:"payload,omitempty" doc:"Kept with the run; a deviceId in it narrows the run to that device (trigger)."`
}

// AutomationRun is one firing of an automation.
type AutomationRun struct {
	ID             string              `json:"id" format:"uuid"`
	AutomationID   string              `json:"automationId" format:"uuid"`
	OrgID          *string             `json:"orgId"`
	Status         string              `json:"status" enum:"running,completed,failed,partial"`
	TriggeredBy    string              `json:"triggeredBy" enum:"schedule,event,webhook,trigger,run"`
	TriggerEventID *string             `json:"triggerEventId"`
	ScheduledFor   *time.Time          `json:"scheduledFor" doc:"schedule: the occurrence the run stands for."`
	Payload        map[string]any      `json:"payload"`
	CurrentAction  int                 `json:"currentAction" doc:"The index of the action under way (or the last one done); -1 before the first."`
	DeviceCount    int                 `json:"deviceCount" doc:"Target devices that met the conditions."`
	Error          *string             `json:"error"`
	CreatedBy      *string             `json:"createdBy"`
	StartedAt      time.Time           `json:"startedAt"`
	CompletedAt    *time.Time          `json:"completedAt"`
	Steps          []AutomationRunStep `json:"steps,omitempty" doc:"In GET /automations/runs/{runId} and the answers of run and trigger; not in lists."`
}

// AutomationRunStep is what one action did on one device (or once, for notify).
type AutomationRunStep struct {
	ID          string     `json:"id" format:"uuid"`
	ActionIndex int        `json:"actionIndex"`
	ActionType  string     `json:"actionType"`
	DeviceID    *string    `json:"deviceId"`
	Status      string     `json:"status" enum:"running,completed,failed,skipped"`
	ExecutionID *string    `json:"executionId" doc:"run_script: the script execution (GET /scripts/executions/{id})."`
	CommandID   *string    `json:"commandId" doc:"run_script and run_command: the device command."`
	AlertID     *string    `json:"alertId"`
	ExitCode    *int       `json:"exitCode"`
	Output      *string    `json:"output" doc:"The first 4000 characters of what the script or command printed."`
	Error       *string    `json:"error"`
	StartedAt   time.Time  `json:"startedAt"`
	CompletedAt *time.Time `json:"completedAt"`
	// batchID is the script execution batch of a run_script step.
	batchID string
}

// definition is what a run does: the automation as it stood when the run started.
type definition struct {
	Conditions       []AutomationCondition `json:"conditions"`
	Actions          []AutomationAction    `json:"actions"`
	Targets          *devices.Targets      `json:"targets"`
	OnFailure        string                `json:"onFailure"`
	NotifyChannelIDs []string              `json:"notifyChannelIds"`
	Name             string                `json:"name"`
	// OnlyDevice narrows the run to the device its event or payload named.
	OnlyDevice string `json:"onlyDevice,omitempty"`
}
