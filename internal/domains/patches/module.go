package patches

import (
	"time"

	"gale/internal/domains/devices"
	"gale/internal/domains/maintenance"
	"gale/internal/domains/rollouts"
	"gale/internal/domains/tenancy"
	"gale/internal/domains/thirdparty"
	"gale/internal/platform/module"
	"gale/internal/wire/agentproto"
)

// Module serves patches: the patch_scan and patch_install command kinds, the routes, the
// rollouts' patch deployer, the sweep of job work whose command ended without a result, the
// release of work held by maintenance windows, each node's builder of compliance reports, and
// patch policies with their runner.
var Module = module.Module{Name: "patches", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Tenancy: module.Get[*tenancy.Service](k), Logger: k.Logger, Clock: k.Clock, Devices: module.Get[*devices.Service](k), Blobs: k.Blobs,
		Maintenance: module.Get[*maintenance.Service](k), Catalog: module.Get[*thirdparty.Service](k)})
	for _, kind := range s.commandKinds() {
		k.Declare(kind)
	}
	k.Declare(Deployer{Patches: s}, module.Get[*rollouts.Service](k).ResultHook(agentproto.CommandPatchInstall))
	s.Register(k.HTTP)
	k.Every("patch-jobs-sweep", time.Minute, s.SweepJobs)
	k.Every("patch-jobs-release", time.Minute, s.ReleaseWaiting)
	k.Worker("patch-reports", s.StartReports, s.StopReports)
	pol := newPolicies(s)
	pol.Register(k.HTTP)
	k.Every("patch-policies", time.Minute, pol.Run)
	k.Provide(s)
	k.Provide(pol)
	return nil
}}
