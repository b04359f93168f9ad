package software

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/domains/maintenance"
	"gale/internal/domains/rollouts"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/apperr"
	"gale/internal/platform/jsonenc"
	"gale/internal/platform/module"
	"gale/internal/wire/agentproto"
)

// Module serves the software catalog, deployments and inventory.
var Module = module.Module{Name: "software", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Tenancy: module.Get[*tenancy.Service](k), Logger: k.Logger, Clock: k.Clock, Devices: module.Get[*devices.Service](k), Blobs: k.Blobs,
		Maintenance: module.Get[*maintenance.Service](k)})
	// An installer that started is not interrupted: a sent software_install cannot be
	// cancelled (CancelRefused), nor can an uninstall.
	k.Declare(devices.CommandKind{Name: agentproto.CommandSoftwareInstall, DefaultTimeout: installTimeout,
		Validate: validateInstall, OnResult: s.onInstallResult,
		PayloadDoc: "{url, sha256, sizeBytes?, fileType: deb|rpm|msi|exe|pkg|dmg, name, version, silentArgs?} (sent by software deployments)."})
	k.Declare(devices.CommandKind{Name: agentproto.CommandSoftwareUninstall, DefaultTimeout: uninstallTimeout,
		Validate: validateUninstall, PayloadDoc: "{name, version?}; packages the system needs are refused."})
	k.Declare(Deployer{Software: s}, module.Get[*rollouts.Service](k).ResultHook(agentproto.CommandSoftwareInstall))
	s.Register(k.HTTP)
	k.Every("software-deployments", time.Minute, func(ctx context.Context) error {
		if err := s.Reconcile(ctx); err != nil {
			return err
		}
		return s.ReleaseWaiting(ctx)
	})
	k.Provide(s)
	return nil
}}

// validateInstall checks a software_install payload for a device of the given system.
func validateInstall(raw json.RawMessage, osType string) (any, error) {
	var p agentproto.SoftwareInstall
	if len(raw) == 0 || jsonenc.DecodeStrict(raw, &p) != nil {
		return nil, apperr.Invalid("payload", "software_install needs {url, sha256, sizeBytes?, fileType, name, version, silentArgs?}")
	}
	p.SHA256 = strings.ToLower(p.SHA256)
	switch {
	case !strings.HasPrefix(p.URL, "https://") && !strings.HasPrefix(p.URL, "http://") && !strings.HasPrefix(p.URL, "/api/v1/agents/"):
		return nil, apperr.Invalid("payload.url", "url is an http(s) address or a server path under /api/v1/agents/")
	case !validSHA256(p.SHA256):
		return nil, apperr.Invalid("payload.sha256", "sha256 is 64 hex digits")
	case strings.TrimSpace(p.Name) == "" || strings.TrimSpace(p.Version) == "":
		return nil, apperr.Invalid("payload.name", "name and version are required")
	case p.SizeBytes < 0:
		return nil, apperr.Invalid("payload.sizeBytes", "sizeBytes cannot be negative")
	}
	os, ok := agentproto.FileTypeOS[p.FileType]
	if !ok {
		return nil, apperr.Invalid("payload.fileType", "fileType is one of deb, rpm, msi, exe, pkg, dmg")
	}
	if osType != "" && osType != os {
		return nil, apperr.BadRequest(agentproto.ErrNotSupported, "a "+p.FileType+" file installs on "+os+", not on "+osType)
	}
	return p, nil
}

// validateUninstall checks a software_uninstall payload.
func validateUninstall(raw json.RawMessage, _ string) (any, error) {
	var p agentproto.SoftwareUninstall
	if len(raw) == 0 || jsonenc.DecodeStrict(raw, &p) != nil || strings.TrimSpace(p.Name) == "" {
		return nil, apperr.Invalid("payload", "software_uninstall needs {name, version?}")
	}
	if protected(p.Name) {
		return nil, apperr.ConflictCode("PROTECTED_SOFTWARE", p.Name+" is needed by the system and is not uninstalled")
	}
	return p, nil
}
