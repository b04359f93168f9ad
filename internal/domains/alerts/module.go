package alerts

import (
	"time"

	"gale/internal/domains/devices"
	"gale/internal/platform/module"
)

// Module serves alert rules, templates and alerts; rules are evaluated in the transactions of
// heartbeats and command results, and every minute.
var Module = module.Module{Name: "alerts", Build: func(k *module.Kernel) error {
	s := New(k.DB, k.Logger, Options{MetricsRetention: k.Config.DeviceMetricsRetention, Wake: k.Events.Wake})
	s.Register(k.HTTP)
	s.RegisterTemplates(k.HTTP)
	module.Get[*devices.Service](k).AddHooks(devices.Hooks{LeftOrg: s.DeviceLeftOrg, Heartbeat: s.EvaluateIsolated,
		CommandFinished: s.EvaluateIsolated})
	k.Every("alerts-evaluate", time.Minute, s.EvaluateAll)
	k.Consume(s.ScriptResults())
	k.Provide(s)
	return nil
}}
