package remote

import (
	"time"

	"gale/internal/domains/agenthub"
	"gale/internal/domains/auth"
	"gale/internal/domains/authtickets"
	"gale/internal/domains/devices"
	"gale/internal/domains/systemtools"
	"gale/internal/platform/module"
	"gale/internal/wire/agentproto"
)

// Module serves remote sessions: terminals over agent streams, desktop signalling relayed to
// agents, file transfers through the system tools' file streams, and the expiry of stale
// sessions every minute.
var Module = module.Module{Name: "remote", Build: func(k *module.Kernel) error {
	c := k.Config
	s := New(Deps{DB: k.DB, Auth: module.Get[*auth.Service](k), Clock: k.Clock, Logger: k.Logger, Devices: module.Get[*devices.Service](k), Agents: module.Get[*agenthub.Hub](k),
		Tickets: module.Get[*authtickets.Service](k), Files: module.Get[*systemtools.Service](k)},
		Options{PublicURL: c.PublicURL, STUNURLs: c.RemoteSTUNURLs, TURNURLs: c.RemoteTURNURLs, TURNSecret: c.RemoteTURNSecret,
			TURNCredentialTTL: c.RemoteTURNCredentialTTL, FileTransferMaxBytes: c.RemoteFileTransferMaxBytes})
	s.Register(k.HTTP)
	k.Declare(agenthub.Message{Type: agentproto.TypeDesktopState, Handle: s.DesktopState})
	k.Every("remote-sessions-expire", time.Minute, s.expireAll)
	k.Provide(s)
	return nil
}}
