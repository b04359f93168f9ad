package rollouts

import (
	"gale/internal/domains/devices"
	"gale/internal/domains/scripts"
	"gale/internal/platform/module"
)

// Module serves deployments: their routes, the script deployer and the runner that moves
// running deployments on.
var Module = module.Module{Name: "rollouts", Build: func(k *module.Kernel) error {
	s := New(k.DB, k.Logger, k.Clock, module.Get[*devices.Service](k))
	s.AddDeployer(ScriptDeployer{Scripts: module.Get[*scripts.Service](k)})
	s.Register(k.HTTP)
	k.Every("deployment-runner", RunnerEvery, s.AdvanceAll)
	k.Provide(s)
	return nil
}}
