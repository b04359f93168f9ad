package mobile

import (
	"gale/internal/alerts"
	"gale/internal/devices"
	"gale/internal/module"
	"gale/internal/notifications"
)

// Module serves the mobile app's API.
var Module = module.Module{Name: "mobile", Build: func(k *module.Kernel) error {
	New(k.DB, k.Logger, module.Get[*devices.Service](k), module.Get[*alerts.Service](k),
		module.Get[*notifications.Service](k)).Register(k.HTTP)
	return nil
}}
