package snmp

import (
	"gale/internal/domains/agenthub"
	"gale/internal/domains/alerts"
	"gale/internal/domains/devices"
	"gale/internal/platform/module"
)

// Module serves the SNMP domain: its routes, the dispatcher that polls due devices through
// the agents, and the purge of old metric samples (SNMP_METRICS_RETENTION_DAYS).
var Module = module.Module{Name: "snmp", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Logger: k.Logger, Box: k.Box, Clock: k.Clock, Devices: module.Get[*devices.Service](k),
		Alerts: module.Get[*alerts.Service](k), Agents: module.Get[*agenthub.Hub](k)},
		Options{Retention: k.Config.SNMPMetricsRetention})
	s.Register(k.HTTP)
	k.Every("snmp-poll-dispatch", DispatchEvery, s.Dispatch)
	k.Purge("snmp-metrics", s.Purge)
	k.Provide(s)
	return nil
}}
