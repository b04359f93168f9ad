package security

import (
	"encoding/json"
	"time"

	"gale/internal/domains/agenthub"
	"gale/internal/domains/devices"
	"gale/internal/platform/apperr"
	"gale/internal/platform/module"
	"gale/internal/wire/agentproto"
)

// Job intervals.
const (
	// RefreshEvery is how often the status job looks for devices whose status is due.
	RefreshEvery = 5 * time.Minute
	// SnapshotEvery is how often the snapshot job runs; it records each organization once a day.
	SnapshotEvery = time.Hour
)

// Module serves security: its routes, the security_status, security_scan and threat_action
// command kinds whose results it stores, the progress running scans report, the status
// refresh, the daily snapshot and the policies' daily scans.
var Module = module.Module{Name: "security", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock, Wake: k.Events.Wake, Devices: module.Get[*devices.Service](k)},
		Options{StatusInterval: k.Config.SecurityStatusInterval})
	linux := []string{agentproto.OSLinux}
	k.Declare(devices.CommandKind{Name: agentproto.CommandSecurityStatus, DefaultTimeout: 120, MaxTimeout: 600, OS: linux,
		OnResult: s.onStatus, PayloadDoc: "No payload: the agent reports the firewall, encryption, password policy, administrators, listening ports, antivirus and automatic updates."})
	k.Declare(devices.CommandKind{Name: agentproto.CommandSecurityScan, Validate: validateScan, DefaultTimeout: scanTimeout,
		MaxTimeout: scanTimeout, OS: linux, OnResult: s.onScan, PayloadDoc: "{scanType: quick|full|custom, paths?: [absolute paths]} (custom: 1 to 100 paths)."})
	k.Declare(devices.CommandKind{Name: agentproto.CommandThreatAction, Validate: validateThreatAction, DefaultTimeout: 120,
		MaxTimeout: 600, OS: linux, OnResult: s.onThreatAction, PayloadDoc: "{action: quarantine|restore|remove, filePath, sha256}."})
	k.Declare(devices.Hooks{Changed: s.deviceChanged, LeftOrg: s.deviceLeftOrg})
	k.Declare(agenthub.Message{Type: agentproto.TypeSecurityScanProgress, Handle: s.onScanProgress})
	s.Register(k.HTTP)
	k.Every("security-status-refresh", RefreshEvery, s.RefreshStatuses)
	k.Every("security-snapshot", SnapshotEvery, s.Snapshot)
	k.Every("security-scheduled-scans", ScheduleEvery, s.RunScheduledScans)
	k.Provide(s)
	return nil
}}

func validateScan(payload json.RawMessage, _ string) (any, error) {
	var p SecurityScanInput
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, apperr.Invalid("payload", "payload must be {scanType, paths?}")
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	return agentproto.SecurityScan{ScanType: p.ScanType, Paths: p.Paths}, nil
}

func validateThreatAction(payload json.RawMessage, _ string) (any, error) {
	var p agentproto.ThreatAction
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, apperr.Invalid("payload", "payload must be {action, filePath, sha256}")
	}
	if _, ok := actionFrom[p.Action]; !ok || p.FilePath == "" || len(p.SHA256) != 64 {
		return nil, apperr.Invalid("payload", "action is quarantine, restore or remove, with filePath and the sha256")
	}
	return p, nil
}
