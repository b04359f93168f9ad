package patches

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"

	"gale/internal/domains/rollouts"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/jsonenc"
)

// DeployPayload is a rollout's payload of patches: the approved patches among patchIds that a
// device has pending (or failed) are installed on it.
type DeployPayload struct {
	Type     string   `json:"type"`
	PatchIDs []string `json:"patchIds"`
}

// Deployer delivers patches for rollouts (payload type "patch"), as install jobs.
type Deployer struct{ Patches *Service }

// Type implements rollouts.Deployer.
func (Deployer) Type() string { return "patch" }

// Permission implements rollouts.Deployer.
func (Deployer) Permission() access.Perm { return access.PatchesExecute }

// Validate implements rollouts.Deployer: 1 to 500 patches, each within reach.
func (d Deployer) Validate(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
	var p DeployPayload
	if err := jsonenc.DecodeStrict(raw, &p); err != nil {
		return nil, apperr.Invalid("payload", "a patch payload is {type, patchIds}: "+err.Error())
	}
	p.PatchIDs = unique(p.PatchIDs)
	if len(p.PatchIDs) == 0 || len(p.PatchIDs) > MaxBulkApprove {
		return nil, apperr.Invalid("payload.patchIds", "name 1 to 500 patches")
	}
	for _, id := range p.PatchIDs {
		if _, err := d.Patches.GetPatch(ctx, id); apperr.IsCode(err, apperr.CodeNotFound) {
			return nil, apperr.Invalid("payload.patchIds", "no such patch: "+id)
		} else if err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(p)
	return b, err
}

// Deploy implements rollouts.Deployer: an install job per chunk of devices, sent whatever the
// maintenance windows say (the rollout decided about them); a device with nothing to install
// is skipped.
func (d Deployer) Deploy(ctx context.Context, tx *sql.Tx, raw json.RawMessage, deviceIDs []string) (rollouts.DeployResult, error) {
	var p DeployPayload
	if err := json.Unmarshal(raw, &p); err != nil {
		return rollouts.DeployResult{}, fmt.Errorf("read the patch payload of a rollout: %w", err)
	}
	var out rollouts.DeployResult
	for chunk := range slices.Chunk(deviceIDs, MaxInstallDevices) {
		job, err := d.Patches.InstallIn(ctx, tx, chunk, p.PatchIDs, InstallOptions{IgnoreHold: true})
		if err != nil {
			return rollouts.DeployResult{}, err
		}
		sent := map[string]bool{}
		for _, c := range job.Commands {
			sent[c.DeviceID] = true
		}
		out.Commands = append(out.Commands, job.Commands...)
		for _, id := range chunk {
			if !sent[id] {
				out.Skipped = append(out.Skipped, rollouts.Skip{DeviceID: id, Reason: "NOTHING_TO_INSTALL: no approved patch among those named is pending on the device"})
			}
		}
	}
	return out, nil
}
