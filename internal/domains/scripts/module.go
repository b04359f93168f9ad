package scripts

import (
	"gale/internal/domains/devices"
	"gale/internal/domains/maintenance"
	"gale/internal/platform/module"
	"gale/internal/wire/agentproto"
)

// Module serves scripts, the script library, bundles and executions.
var Module = module.Module{Name: "scripts", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock, Devices: module.Get[*devices.Service](k),
		Maintenance: module.Get[*maintenance.Service](k)})
	k.Declare(devices.ResultHook{Kind: agentproto.CommandRunScript, Run: recordOutcome})
	s.Register(k.HTTP)
	k.Provide(s)
	return nil
}}
