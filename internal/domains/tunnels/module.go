package tunnels

import (
	"gale/internal/domains/agenthub"
	"gale/internal/domains/audit"
	"gale/internal/domains/authtickets"
	"gale/internal/domains/devices"
	"gale/internal/platform/module"
)

// Module serves tunnels and their proxy.
var Module = module.Module{Name: "tunnels", Build: func(k *module.Kernel) error {
	s := New(k.DB, module.Get[*devices.Service](k), module.Get[*agenthub.Hub](k), module.Get[*authtickets.Service](k),
		module.Get[*audit.Log](k), k.Logger, Options{AllowDeviceLocal: k.Config.TunnelAllowDeviceLocal,
			MaxResponseBytes: k.Config.TunnelMaxResponseBytes, ResponseTimeout: k.Config.TunnelResponseTimeout,
			PublicURL: k.Config.PublicURL, CookieKey: CookieKey(k.Config.JWTSecret), Clock: k.Clock})
	s.Register(k.HTTP)
	k.Purge("tunnels", s.purge)
	k.OnClose(s.closeIdle)
	k.Provide(s)
	return nil
}}
