package alerts

import (
	"context"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/domains/maintenance"
	"gale/internal/platform/module"
)

// Module serves alert rules, templates and alerts; rules are evaluated in the transactions of
// heartbeats and command results, and every minute.
var Module = module.Module{Name: "alerts", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock, Wake: k.Events.Wake, Maintenance: module.Get[*maintenance.Service](k),
		Devices: module.Get[*devices.Service](k)},
		Options{MetricsRetention: k.Config.DeviceMetricsRetention})
	s.Register(k.HTTP)
	s.RegisterTemplates(k.HTTP)
	k.Declare(devices.Hooks{LeftOrg: s.DeviceLeftOrg, Heartbeat: s.EvaluateAllIsolated,
		CommandFinished: s.EvaluateIsolated})
	k.Every("alerts-evaluate", time.Minute, s.EvaluateAll)
	k.Consume(s.ScriptResults())
	k.OnReady(func(context.Context) error { return s.useChannelCheck(module.Declared[ChannelCheck](k)) })
	k.Provide(s)
	return nil
}}
