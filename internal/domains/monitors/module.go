package monitors

import (
	"gale/internal/domains/agenthub"
	"gale/internal/domains/alerts"
	"gale/internal/domains/devices"
	"gale/internal/platform/module"
	"gale/internal/wire/agentproto"
)

// Module serves monitors: their routes, the monitor_checks command kind whose results it
// stores, the scheduler that sends due checks every 2 seconds and the purge of old results.
var Module = module.Module{Name: "monitors", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock, Devices: module.Get[*devices.Service](k),
		Alerts: module.Get[*alerts.Service](k), Agents: module.Get[*agenthub.Hub](k), Wake: k.Events.Wake},
		Options{Retention: k.Config.MonitorResultsRetention})
	k.Declare(devices.CommandKind{Name: agentproto.CommandMonitorChecks, Validate: validateChecks, DefaultTimeout: 300,
		MaxTimeout: 3600, OnResult: s.onChecks,
		PayloadDoc: "Sent by the monitor scheduler: {checks: [{monitorId, type, target, config, timeoutSeconds}]}, at most 500."})
	s.Register(k.HTTP)
	k.Every("monitor-dispatch", DispatchEvery, s.Dispatch)
	k.Purge("monitor-results", s.Purge)
	k.Provide(s)
	return nil
}}
