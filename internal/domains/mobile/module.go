package mobile

import (
	"gale/internal/domains/alerts"
	"gale/internal/domains/devices"
	"gale/internal/domains/notifications"
	"gale/internal/platform/module"
)

// Module serves the mobile app's API.
var Module = module.Module{Name: "mobile", Build: func(k *module.Kernel) error {
	New(k.DB, k.Logger, module.Get[*devices.Service](k), module.Get[*alerts.Service](k),
		module.Get[*notifications.Service](k)).Register(k.HTTP)
	return nil
}}
