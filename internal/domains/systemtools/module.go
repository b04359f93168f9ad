package systemtools

import (
	"gale/internal/domains/agenthub"
	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/platform/module"
)

// Module serves the system tools (processes, services, files, registry, event logs) that run
// as calls to a device's agent, and provides their file transfers to other domains.
var Module = module.Module{Name: "systemtools", Build: func(k *module.Kernel) error {
	s := New(Deps{Devices: module.Get[*devices.Service](k), Agents: module.Get[*agenthub.Hub](k), Audit: module.Get[*audit.Log](k)})
	s.Register(k.HTTP)
	k.Provide(s)
	return nil
}}
