package automations

import (
	"time"

	"gale/internal/domains/alertchannels"
	"gale/internal/domains/alerts"
	"gale/internal/domains/devices"
	"gale/internal/domains/maintenance"
	"gale/internal/domains/scripts"
	"gale/internal/platform/access"
	"gale/internal/platform/module"
	"gale/internal/platform/partnerexport"
)

// Module serves automations: their routes, the schedules, the event consumer, each node's
// runner of running runs and the partner-API export.
var Module = module.Module{Name: "automations", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Logger: k.Logger, Box: k.Box, Clock: k.Clock, Devices: module.Get[*devices.Service](k),
		Scripts: module.Get[*scripts.Service](k), Alerts: module.Get[*alerts.Service](k), Notify: module.Get[*alertchannels.Service](k),
		Maintenance: module.Get[*maintenance.Service](k)}, Options{PublicURL: k.Config.PublicURL})
	s.Register(k.HTTP)
	k.Consume(s.Consumer())
	k.Every("automation-schedules", ScheduleEvery, s.RunSchedules)
	k.Worker("automation-runner", s.StartRunner, s.StopRunner)
	k.Purge("automation-webhook-signatures", s.PurgeSignatures)
	k.Provide(s)
	k.Declare(partnerexport.Export[Automation]{Name: "automations", Scope: access.ConfigurationRead, Summary: "Export automations",
		Fetch: s.ExportAutomations, Description: "Automations, partner-wide ones and those of the partner's organizations, as " +
			"GET /automations shows them (trigger, conditions, actions, targets). A deleted automation leaves no row.",
		Key: func(x Automation) (time.Time, []string) { return x.UpdatedAt, []string{x.ID} }})
	return nil
}}
