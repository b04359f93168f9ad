package software

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

func installedOf(p devices.InstalledSoftware) SoftwareInstalledPackage {
	return SoftwareInstalledPackage{SoftwareID: p.ID, Name: p.Name, Version: p.Version, Publisher: p.Publisher,
		Architecture: p.Architecture, InstallDate: p.InstallDate, SizeBytes: p.SizeBytes, Source: p.Source, Protected: protected(p.Name)}
}

// DeviceSoftware lists the software a device in scope last reported, by name.
func (s *Service) DeviceSoftware(ctx context.Context, deviceID, search string, page store.Page) ([]SoftwareInstalledPackage, string, *int, error) {
	rows, next, total, err := s.devices.Software(ctx, deviceID, search, page)
	if err != nil {
		return nil, "", nil, err
	}
	out := make([]SoftwareInstalledPackage, len(rows))
	for i, p := range rows {
		out[i] = installedOf(p)
	}
	return out, next, total, nil
}

// Uninstall removes an installed package from a device in scope with a software_uninstall
// command: 404 for a softwareId the device's last inventory lacks, 409 PROTECTED_SOFTWARE for
// a package the system needs, refused before any command.
func (s *Service) Uninstall(ctx context.Context, deviceID, softwareID string) (devices.DeviceCommand, error) {
	p, err := s.devices.InstalledPackage(ctx, deviceID, softwareID)
	if err != nil {
		return devices.DeviceCommand{}, err
	}
	if protected(p.Name) {
		return devices.DeviceCommand{}, apperr.ConflictCode("PROTECTED_SOFTWARE", p.Name+" is needed by the system and is not uninstalled")
	}
	// The version guards against a stale request: the agent removes nothing if it changed.
	payload := agentproto.SoftwareUninstall{Name: p.Name, Version: p.Version}
	d, err := s.devices.Get(ctx, deviceID)
	if err != nil {
		return devices.DeviceCommand{}, err
	}
	var cmd devices.DeviceCommand
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		res, err := s.devices.SendBulkIn(ctx, tx, devices.BulkInput{DeviceIDs: []string{deviceID}, Audited: true,
			CommandInput: devices.CommandInput{Type: agentproto.CommandSoftwareUninstall, Payload: json.RawMessage(store.EncodeJSON(payload))}})
		if err != nil {
			return err
		}
		switch {
		case len(res.Commands) == 1:
			cmd = res.Commands[0]
		case len(res.Failed) == 1:
			return apperr.NotFound("device")
		case len(res.Skipped) == 1:
			return apperr.BadRequest(res.Skipped[0].Code, res.Skipped[0].Reason)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "software.uninstall", ResourceType: "device", ResourceID: deviceID,
			ResourceName: d.Hostname, PartnerID: d.PartnerID, OrgID: d.OrgID, Details: map[string]any{"commandId": cmd.ID,
				"softwareId": softwareID, "name": p.Name, "version": p.Version}})
	})
	if err != nil {
		return devices.DeviceCommand{}, fmt.Errorf("uninstall software: %w", err)
	}
	cmds := []devices.DeviceCommand{cmd}
	s.devices.Dispatch(ctx, cmds)
	return cmds[0], nil
}

// Fleet lists the installed software of the devices in scope (not decommissioned), one row per
// name and version with the number of devices that have it, by name then version.
func (s *Service) Fleet(ctx context.Context, f devices.SoftwareSummaryFilter, page store.Page) ([]devices.SoftwareCount, string, error) {
	if page.Number > 0 {
		return nil, "", apperr.Invalid("page", "this list pages with cursor only")
	}
	return s.devices.SoftwareSummary(ctx, f, page.Limit, page.Cursor)
}
