package tunnels

import (
	"gale/internal/domains/agenthub"
	"gale/internal/domains/audit"
	"gale/internal/domains/auth"
	"gale/internal/domains/authtickets"
	"gale/internal/domains/devices"
	"gale/internal/platform/module"
)

// Module serves tunnels and their proxy.
var Module = module.Module{Name: "tunnels", Build: func(k *module.Kernel) error {
	c := k.Config
	s := New(Deps{DB: k.DB, Auth: module.Get[*auth.Service](k), Logger: k.Logger, Clock: k.Clock, Devices: module.Get[*devices.Service](k), Agents: module.Get[*agenthub.Hub](k),
		Tickets: module.Get[*authtickets.Service](k), Audit: module.Get[*audit.Log](k)},
		Options{AllowDeviceLocal: c.TunnelAllowDeviceLocal, MaxResponseBytes: c.TunnelMaxResponseBytes,
			ResponseTimeout: c.TunnelResponseTimeout, PublicURL: c.PublicURL, CookieKey: CookieKey(c.JWTSecret)})
	s.Register(k.HTTP)
	k.Purge("tunnels", s.purge)
	k.OnClose(s.closeIdle)
	k.Provide(s)
	return nil
}}
