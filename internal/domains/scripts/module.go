package scripts

import (
	"gale/internal/domains/devices"
	"gale/internal/platform/module"
	"gale/internal/wire/agentproto"
)

// Module serves scripts, the script library, bundles and executions.
var Module = module.Module{Name: "scripts", Build: func(k *module.Kernel) error {
	dev := module.Get[*devices.Service](k)
	s := New(k.DB, k.Logger, dev)
	dev.AddResultHook(agentproto.CommandRunScript, recordOutcome)
	s.Register(k.HTTP)
	k.Provide(s)
	return nil
}}
