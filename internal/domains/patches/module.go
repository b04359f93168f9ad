package patches

import (
	"context"
	"database/sql"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/domains/maintenance"
	"gale/internal/domains/rollouts"
	"gale/internal/domains/thirdparty"
	"gale/internal/platform/module"
)

// Module serves patches: the patch_scan and patch_install command kinds, the routes, the
// rollouts' patch deployer, the hold of maintenance windows suppressing patches, the
// sweep of job work whose command ended without a result, the release of work held by
// maintenance rules, each node's builder of compliance reports, and patch policies with
// their runner.
var Module = module.Module{Name: "patches", Build: func(k *module.Kernel) error {
	s := New(k.DB, k.Logger, module.Get[*devices.Service](k), k.Blobs)
	m := module.Get[*maintenance.Service](k)
	s.Catalog = module.Get[*thirdparty.Service](k)
	s.Hold = func(ctx context.Context, tx *sql.Tx, ids []string) (map[string]bool, error) {
		return m.Held(ctx, tx, maintenance.Patches, ids)
	}
	module.Get[*rollouts.Service](k).AddDeployer(Deployer{Patches: s})
	s.Register(k.HTTP)
	k.Every("patch-jobs-sweep", time.Minute, s.SweepJobs)
	k.Every("patch-jobs-release", time.Minute, s.ReleaseWaiting)
	k.Worker("patch-reports", s.StartReports, s.StopReports)
	pol := NewPolicies(s, k.Clock, m)
	pol.Register(k.HTTP)
	k.Every("patch-policies", time.Minute, pol.Run)
	k.Provide(s)
	k.Provide(pol)
	return nil
}}
