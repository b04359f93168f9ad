package groups

import (
	"time"

	"gale/internal/domains/customfields"
	"gale/internal/domains/devices"
	"gale/internal/platform/module"
)

// Module serves device groups and keeps dynamic membership current: in the transaction of
// every device or custom field change, and by a periodic recompute.
var Module = module.Module{Name: "groups", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock})
	s.Register(k.HTTP)
	k.Declare(devices.Hooks{Changed: s.DeviceChanged, LeftOrg: s.DeviceLeftOrg})
	k.Declare(customfields.Hook(s.DeviceChanged))
	k.Declare(devices.Groups{MemberOf: MemberOf, Owners: Owners})
	k.Every("groups-recompute", 5*time.Minute, s.RecomputeAll)
	k.Provide(s)
	return nil
}}
