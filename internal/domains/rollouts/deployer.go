package rollouts

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"

	"gale/internal/domains/devices"
	"gale/internal/domains/scripts"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/jsonenc"
	"gale/internal/platform/store"
)

// Deployer delivers one type of payload. The module of a payload type declares its Deployer on
// the module kernel, with the Service's ResultHook for the command kind it sends.
type Deployer interface {
	// Type is the payload's type: "script", "software", "patch".
	Type() string
	// Permission is what starting it needs besides configuration:write.
	Permission() access.Perm
	// Validate checks and normalizes a payload in the caller's scope (400s).
	Validate(ctx context.Context, payload json.RawMessage) (json.RawMessage, error)
	// Deploy starts the payload on the devices in tx; dispatch happens after commit.
	Deploy(ctx context.Context, tx *sql.Tx, payload json.RawMessage, deviceIDs []string) (DeployResult, error)
}

// DeployResult is what Deploy did per device: a command for each device it deployed, and the
// devices it left out on purpose.
type DeployResult struct {
	Commands []devices.DeviceCommand
	Skipped  []Skip
}

// Skip is a device a deployer left out, and why.
type Skip struct {
	DeviceID string
	Reason   string
}

// ScriptPayload is a script deployment's payload.
type ScriptPayload struct {
	Type       string         `json:"type"`
	ScriptID   string         `json:"scriptId"`
	Parameters map[string]any `json:"parameters,omitempty"`
	RunAs      string         `json:"runAs,omitempty"`
}

// ScriptDeployer runs a script on the devices, as script executions.
type ScriptDeployer struct{ Scripts *scripts.Service }

// Type implements Deployer.
func (ScriptDeployer) Type() string { return "script" }

// Permission implements Deployer.
func (ScriptDeployer) Permission() access.Perm { return access.ScriptsExecute }

// Validate implements Deployer: the script must be within reach; its parameters are checked
// against the script when each batch goes out.
func (d ScriptDeployer) Validate(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
	var p ScriptPayload
	if err := jsonenc.DecodeStrict(raw, &p); err != nil {
		return nil, apperr.Invalid("payload", "a script payload is {type, scriptId, parameters?, runAs?}: "+err.Error())
	}
	if !store.ValidID(p.ScriptID) {
		return nil, apperr.Invalid("payload.scriptId", "scriptId must be a script's ID")
	}
	if p.RunAs != "" && !slices.Contains([]string{"system", "user", "elevated"}, p.RunAs) {
		return nil, apperr.Invalid("payload.runAs", "runAs must be one of system, user, elevated")
	}
	if _, err := d.Scripts.Get(ctx, p.ScriptID); apperr.IsCode(err, apperr.CodeNotFound) {
		return nil, apperr.Invalid("payload.scriptId", "no such script within the deployment's organization")
	} else if err != nil {
		return nil, fmt.Errorf("check script %s: %w", p.ScriptID, err)
	}
	return json.RawMessage(store.EncodeJSON(p)), nil
}

// Deploy implements Deployer: one script execution per device, in chunks of the bulk limit.
func (d ScriptDeployer) Deploy(ctx context.Context, tx *sql.Tx, raw json.RawMessage, deviceIDs []string) (DeployResult, error) {
	var p ScriptPayload
	if err := json.Unmarshal(raw, &p); err != nil {
		return DeployResult{}, fmt.Errorf("read script payload: %w", err)
	}
	var out DeployResult
	for chunk := range slices.Chunk(deviceIDs, scripts.MaxExecuteDevices) {
		res, cmds, err := d.Scripts.ExecuteIn(ctx, tx, p.ScriptID, scripts.ScriptRun{DeviceIDs: chunk, Parameters: p.Parameters, RunAs: p.RunAs})
		if err != nil {
			return DeployResult{}, err
		}
		out.Commands = append(out.Commands, cmds...)
		for _, it := range append(res.Skipped, res.Failed...) {
			out.Skipped = append(out.Skipped, Skip{DeviceID: it.DeviceID, Reason: it.Code + ": " + it.Reason})
		}
	}
	return out, nil
}
