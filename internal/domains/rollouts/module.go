package rollouts

import (
	"context"

	"gale/internal/domains/devices"
	"gale/internal/domains/maintenance"
	"gale/internal/domains/scripts"
	"gale/internal/platform/module"
	"gale/internal/wire/agentproto"
)

// Module serves deployments: their routes, the script deployer and the runner that moves
// running deployments on. Other payload types come from the Deployers other modules declare.
var Module = module.Module{Name: "rollouts", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock, Devices: module.Get[*devices.Service](k),
		Maintenance: module.Get[*maintenance.Service](k)})
	k.Declare(ScriptDeployer{Scripts: module.Get[*scripts.Service](k)}, s.ResultHook(agentproto.CommandRunScript))
	s.Register(k.HTTP)
	k.Every("deployment-runner", RunnerEvery, s.AdvanceAll)
	k.OnReady(func(context.Context) error { return s.plug(module.Declared[Deployer](k)) })
	k.Provide(s)
	return nil
}}
