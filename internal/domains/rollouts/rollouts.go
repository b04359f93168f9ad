// Package rollouts delivers a payload (a script, a software version, a patch set) to the
// devices of one organization, at once or in batches: the API's deployments. A deployment is
// written as a draft, initialized (its targets resolved into devices, numbered into batches),
// started, and then moved on by a runner: each batch goes out once the previous one settled
// and the delay passed; failed devices are retried after a backoff; a batch whose failures
// reach the thresholds pauses the deployment; devices in a maintenance window wait.
package rollouts

import (
	"encoding/json"
	"time"

	"gale/internal/domains/devices"
)

// Deployment statuses: draft → pending (initialize) → running (start) ⇄ paused → completed |
// failed | cancelled.
const (
	StatusDraft     = "draft"
	StatusPending   = "pending"
	StatusRunning   = "running"
	StatusPaused    = "paused"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// Device statuses: pending until its batch goes out, waiting while a maintenance window holds
// it, queued once its command exists, running once the agent has it, then an end.
const (
	DevicePending   = "pending"
	DeviceWaiting   = "waiting"
	DeviceQueued    = "queued"
	DeviceRunning   = "running"
	DeviceSucceeded = "succeeded"
	DeviceFailed    = "failed"
	DeviceSkipped   = "skipped"
	DeviceCancelled = "cancelled"
)

// Strategy modes.
const (
	ModeImmediate = "immediate"
	ModeStaggered = "staggered"
)

// Events a deployment records.
const (
	EventStarted   = "deployment.started"
	EventPaused    = "deployment.paused"
	EventCompleted = "deployment.completed"
	EventFailed    = "deployment.failed"
	EventCancelled = "deployment.cancelled"
)

// Error codes.
const (
	CodeNotDraft       = "DEPLOYMENT_NOT_DRAFT"
	CodeStateConflict  = "DEPLOYMENT_STATE_CONFLICT"
	CodeDeviceNotFail  = "DEVICE_NOT_FAILED"
	CodeNoDevices      = "DEPLOYMENT_NO_DEVICES"
	CodeTooManyDevices = "DEPLOYMENT_TOO_MANY_DEVICES"
)

// Limits.
const (
	maxNameLen        = 255
	maxDescriptionLen = 4000
	// MaxDevices bounds the devices one deployment resolves to.
	MaxDevices        = 10_000
	maxBatchSize      = 1000
	maxDelayMinutes   = 1440
	maxAttempts       = 5
	maxBackoffMinutes = 1440
	defaultBackoff    = 5
	maxErrorLen       = 1000
)

// DeploymentStrategy is how a deployment delivers its payload.
type DeploymentStrategy struct {
	Mode                  string `json:"mode" enum:"immediate,staggered" doc:"immediate: every device in one batch."`
	BatchSize             int    `json:"batchSize,omitempty" minimum:"1" maximum:"1000" doc:"staggered: devices per batch (required)."`
	DelayMinutes          int    `json:"delayMinutes" required:"false" minimum:"0" maximum:"1440" doc:"staggered: wait between a batch settling and the next going out."`
	PauseOnFailures       int    `json:"pauseOnFailures" required:"false" minimum:"0" doc:"Pause when this many devices of one batch failed; 0: never."`
	PauseOnFailurePercent int    `json:"pauseOnFailurePercent" required:"false" minimum:"0" maximum:"100" doc:"Pause when this percent of one batch's devices failed; 0: never."`
}

// DeploymentRetry is how often a failed device is tried again, automatically.
type DeploymentRetry struct {
	MaxAttempts    int `json:"maxAttempts" required:"false" minimum:"1" maximum:"5" doc:"Attempts per device, the first included; default 1 (no retry)."`
	BackoffMinutes int `json:"backoffMinutes" required:"false" minimum:"1" maximum:"1440" doc:"Wait after a failure before the next attempt; default 5."`
}

// DeploymentTotals count a deployment's devices per status.
type DeploymentTotals struct {
	Devices   int `json:"devices"`
	Pending   int `json:"pending"`
	Waiting   int `json:"waiting"`
	Queued    int `json:"queued"`
	Running   int `json:"running"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Skipped   int `json:"skipped"`
	Cancelled int `json:"cancelled"`
}

func (t *DeploymentTotals) add(status string, n int) {
	t.Devices += n
	switch status {
	case DevicePending:
		t.Pending += n
	case DeviceWaiting:
		t.Waiting += n
	case DeviceQueued:
		t.Queued += n
	case DeviceRunning:
		t.Running += n
	case DeviceSucceeded:
		t.Succeeded += n
	case DeviceFailed:
		t.Failed += n
	case DeviceSkipped:
		t.Skipped += n
	case DeviceCancelled:
		t.Cancelled += n
	}
}

// Deployment is the API view of a deployment.
type Deployment struct {
	ID                        string             `json:"id" format:"uuid"`
	PartnerID                 string             `json:"partnerId" format:"uuid"`
	OrgID                     string             `json:"orgId" format:"uuid"`
	Name                      string             `json:"name"`
	Description               string             `json:"description"`
	Status                    string             `json:"status" enum:"draft,pending,running,paused,completed,failed,cancelled"`
	Payload                   json.RawMessage    `json:"payload" doc:"What is delivered: {type: script, scriptId, parameters?, runAs?}; software and patch as their types define."`
	Targets                   devices.Targets    `json:"targets"`
	Strategy                  DeploymentStrategy `json:"strategy"`
	Retry                     DeploymentRetry    `json:"retry"`
	RespectMaintenanceWindows bool               `json:"respectMaintenanceWindows"`
	Totals                    DeploymentTotals   `json:"totals"`
	BatchCount                int                `json:"batchCount" doc:"Set by initialize."`
	CurrentBatch              int                `json:"currentBatch" doc:"The batch under way, from 1; 0 before the start."`
	NextBatchAt               *time.Time         `json:"nextBatchAt" doc:"Once the current batch settled: when the next goes out (after the last: when the deployment ends)."`
	PauseReason               *string            `json:"pauseReason"`
	CreatedBy                 *string            `json:"createdBy"`
	CreatedAt                 time.Time          `json:"createdAt"`
	UpdatedAt                 time.Time          `json:"updatedAt"`
	StartedAt                 *time.Time         `json:"startedAt"`
	CompletedAt               *time.Time         `json:"completedAt"`
	payloadType               string
}

// DeploymentDevice is one device of a deployment.
type DeploymentDevice struct {
	DeviceID    string     `json:"deviceId" format:"uuid"`
	Batch       int        `json:"batch"`
	Status      string     `json:"status" enum:"pending,waiting,queued,running,succeeded,failed,skipped,cancelled"`
	Attempts    int        `json:"attempts"`
	CommandID   *string    `json:"commandId" doc:"The device command of the latest attempt (GET /devices/{id}/commands/{commandId})."`
	Error       *string    `json:"error"`
	StartedAt   *time.Time `json:"startedAt" doc:"When the latest attempt went out."`
	CompletedAt *time.Time `json:"completedAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
}

// DeploymentInput is the body of a create.
type DeploymentInput struct {
	OrgID                     string              `json:"orgId,omitempty" format:"uuid" doc:"The organization; required but of an organization's own callers."`
	Name                      string              `json:"name" minLength:"1" maxLength:"255"`
	Description               string              `json:"description,omitempty" maxLength:"4000" multiline:"true"`
	Payload                   map[string]any      `json:"payload" doc:"{type: script|software|patch, ...}: see the API notes."`
	Targets                   devices.Targets     `json:"targets"`
	Strategy                  *DeploymentStrategy `json:"strategy,omitempty" doc:"Default immediate."`
	Retry                     *DeploymentRetry    `json:"retry,omitempty" doc:"Default one attempt."`
	RespectMaintenanceWindows *bool               `json:"respectMaintenanceWindows,omitempty" doc:"Default true."`
}

// DeploymentUpdate is the body of a PATCH (drafts only): absent fields stay.
type DeploymentUpdate struct {
	Name                      *string             `json:"name,omitempty" minLength:"1" maxLength:"255"`
	Description               *string             `json:"description,omitempty" maxLength:"4000" multiline:"true"`
	Payload                   map[string]any      `json:"payload,omitempty"`
	Targets                   *devices.Targets    `json:"targets,omitempty"`
	Strategy                  *DeploymentStrategy `json:"strategy,omitempty"`
	Retry                     *DeploymentRetry    `json:"retry,omitempty"`
	RespectMaintenanceWindows *bool               `json:"respectMaintenanceWindows,omitempty"`
}
