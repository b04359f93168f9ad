package vulnerabilities

import (
	"context"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/domains/patches"
	"gale/internal/platform/module"
	"gale/internal/wire/agentproto"
)

// Module serves vulnerabilities: the routes, the package_changelog command kind whose results
// become advisories, the patch-scan hook that asks for the changelogs of new security
// upgrades, the device hooks that correlate a device whose inventory changed (and drop the
// findings of one that left), and the periodic jobs: changelog fetches left pending, expired
// acceptances, and a full correlation.
var Module = module.Module{Name: "vulnerabilities", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock, Devices: module.Get[*devices.Service](k),
		Patches: module.Get[*patches.Service](k)})
	k.Declare(devices.CommandKind{Name: agentproto.CommandPackageChangelog, Validate: validateChangelog, DefaultTimeout: fetchTimeout,
		MaxTimeout: 3600, OS: []string{agentproto.OSLinux}, OnResult: s.onChangelog,
		PayloadDoc: "Sent by the vulnerabilities domain: {packages: [{name, version, sinceVersion?}]} (1 to 50): the CVEs the Debian changelog names."})
	k.Declare(devices.ResultHook{Kind: agentproto.CommandPatchScan, Run: s.OnPatchScan})
	k.Declare(devices.Hooks{Changed: s.DeviceChanged, LeftOrg: s.DeviceLeftOrg})
	s.Register(k.HTTP)
	k.Every("vulnerability-changelogs", time.Minute, func(ctx context.Context) error {
		_, err := s.FetchChangelogs(ctx)
		return err
	})
	k.Every("vulnerability-acceptances", time.Minute, s.ReopenExpired)
	k.Every("vulnerability-correlation", 6*time.Hour, func(ctx context.Context) error {
		_, err := s.CorrelateAll(ctx)
		return err
	})
	k.Provide(s)
	return nil
}}
