package software

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"gale/internal/domains/devices"
	"gale/internal/domains/rollouts"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/jsonenc"
)

// DeployPayload is a rollout's payload of software: a version of the catalog.
type DeployPayload struct {
	Type      string `json:"type"`
	VersionID string `json:"versionId"`
}

// Deployer delivers a software version for rollouts (payload type "software"): each batch
// becomes a software deployment of its devices, whose rows and results show as any other's.
type Deployer struct{ Software *Service }

// Type implements rollouts.Deployer.
func (Deployer) Type() string { return "software" }

// Permission implements rollouts.Deployer.
func (Deployer) Permission() access.Perm { return access.SoftwareExecute }

// Validate implements rollouts.Deployer: the version must be of a live catalog item within
// reach.
func (d Deployer) Validate(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
	var p DeployPayload
	if err := jsonenc.DecodeStrict(raw, &p); err != nil {
		return nil, apperr.Invalid("payload", "a software payload is {type, versionId}: "+err.Error())
	}
	if _, err := getVersion(ctx, d.Software.db, access.ScopeFrom(ctx), p.VersionID); apperr.IsCode(err, apperr.CodeNotFound) {
		return nil, apperr.Invalid("payload.versionId", "no such version within the deployment's organization")
	} else if err != nil {
		return nil, err
	}
	return json.Marshal(p)
}

// Deploy implements rollouts.Deployer: one software deployment of the batch's devices, sent
// whatever the maintenance windows say (the rollout decided about them).
func (d Deployer) Deploy(ctx context.Context, tx *sql.Tx, raw json.RawMessage, deviceIDs []string) (rollouts.DeployResult, error) {
	var p DeployPayload
	if err := json.Unmarshal(raw, &p); err != nil {
		return rollouts.DeployResult{}, fmt.Errorf("read the software payload of a rollout: %w", err)
	}
	s := d.Software
	v, err := getVersion(ctx, tx, access.ScopeFrom(ctx), p.VersionID)
	if err != nil {
		return rollouts.DeployResult{}, err
	}
	var out rollouts.DeployResult
	var devs []devices.Device
	for _, id := range deviceIDs {
		dev, err := s.devices.Get(ctx, id)
		if err == nil && dev.Status != devices.StatusDecommissioned {
			devs = append(devs, dev)
			continue
		}
		if err != nil && !apperr.IsCode(err, apperr.CodeNotFound) {
			return rollouts.DeployResult{}, err
		}
		out.Skipped = append(out.Skipped, rollouts.Skip{DeviceID: id, Reason: "the device is gone"})
	}
	if len(devs) == 0 {
		return out, nil
	}
	at := tenancy.Placement{PartnerID: devs[0].PartnerID, OrgID: devs[0].OrgID}
	targets := devices.Targets{Type: devices.TargetDevices}
	for _, dev := range devs {
		targets.IDs = append(targets.IDs, dev.ID)
	}
	_, cmds, skipped, err := s.deployIn(ctx, tx, at, v, devs, newDeployment{name: fmt.Sprintf("%s %s (rollout)", v.Item.Name, v.Version),
		targets: targets, schedule: SoftwareDeploymentSchedule{Mode: ScheduleNow}, open: true})
	if err != nil {
		return rollouts.DeployResult{}, err
	}
	out.Commands = cmds
	for _, sk := range skipped {
		out.Skipped = append(out.Skipped, rollouts.Skip{DeviceID: sk.deviceID, Reason: sk.reason})
	}
	return out, nil
}
