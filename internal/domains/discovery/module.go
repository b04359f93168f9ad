package discovery

import (
	"time"

	"gale/internal/domains/devices"
	"gale/internal/domains/monitors"
	"gale/internal/domains/snmp"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/module"
)

// TickEvery is how often jobs are brought in step with their commands and due scans start.
const TickEvery = 30 * time.Second

// Module serves network discovery: the network_scan command kind, the routes, the job that
// follows scans and starts scheduled ones, and the monitoring of assets through the monitors
// and SNMP services.
var Module = module.Module{Name: "discovery", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock, Box: k.Box, Devices: module.Get[*devices.Service](k),
		Tenancy: module.Get[*tenancy.Service](k), Monitors: module.Get[*monitors.Service](k), SNMP: module.Get[*snmp.Service](k)})
	k.Declare(s.commandKind())
	s.Register(k.HTTP)
	k.Every("discovery-jobs", TickEvery, s.Tick)
	k.Provide(s)
	return nil
}}
