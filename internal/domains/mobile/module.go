package mobile

import (
	"gale/internal/domains/alerts"
	"gale/internal/domains/devices"
	"gale/internal/domains/notifications"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/module"
)

// Module serves the mobile app's API.
var Module = module.Module{Name: "mobile", Build: func(k *module.Kernel) error {
	New(Deps{DB: k.DB, Logger: k.Logger, Tenancy: module.Get[*tenancy.Service](k), Devices: module.Get[*devices.Service](k), Alerts: module.Get[*alerts.Service](k),
		Notifications: module.Get[*notifications.Service](k)}).Register(k.HTTP)
	return nil
}}
