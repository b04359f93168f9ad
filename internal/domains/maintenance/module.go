package maintenance

import (
	"context"
	"database/sql"
	"time"

	"gale/internal/domains/alerts"
	"gale/internal/domains/automations"
	"gale/internal/domains/rollouts"
	"gale/internal/domains/scripts"
	"gale/internal/platform/module"
)

// TickEvery is how often the job moves occurrences on and writes them ahead.
const TickEvery = time.Minute

// Module serves maintenance windows: their routes and the job that moves occurrences on. It
// holds alerts, automations, scripts and rollouts back from the devices in a window that
// suppresses them (a rollout of a script as scripts, of software or patches as patches); the domains built
// after it (patches, software, rollouts) take their holds from its service.
var Module = module.Module{Name: "maintenance", Build: func(k *module.Kernel) error {
	s := New(k.DB, k.Logger, k.Clock, k.Events.Wake)
	s.Register(k.HTTP)
	k.Every("maintenance-occurrences", TickEvery, s.Tick)
	k.Purge("maintenance-occurrences", s.Purge)
	module.Get[*automations.Service](k).SetMaintenance(s)
	module.Get[*alerts.Service](k).SetHold(func(ctx context.Context, tx *sql.Tx, ids []string) (map[string]bool, error) {
		return s.Held(ctx, tx, Alerts, ids)
	})
	module.Get[*rollouts.Service](k).SetHold(func(ctx context.Context, tx *sql.Tx, payloadType string, ids []string) (map[string]bool, error) {
		what := Patches
		if payloadType == "script" {
			what = Scripts
		}
		return s.Held(ctx, tx, what, ids)
	})
	module.Get[*scripts.Service](k).SetHold(func(ctx context.Context, tx *sql.Tx, ids []string) (map[string]bool, error) {
		return s.Held(ctx, tx, Scripts, ids)
	})
	k.Provide(s)
	return nil
}}
