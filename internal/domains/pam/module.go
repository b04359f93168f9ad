package pam

import (
	"gale/internal/domains/agenthub"
	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/module"
	"gale/internal/wire/agentproto"
)

// Module serves privileged access management: its routes, the elevation_request messages
// agents send, the elevation_decision command kind that carries decisions back, and the
// expiry of approvals and unanswered requests every 15 seconds.
var Module = module.Module{Name: "pam", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Tenancy: module.Get[*tenancy.Service](k), Logger: k.Logger, Clock: k.Clock, Wake: k.Events.Wake, Devices: module.Get[*devices.Service](k)})
	k.Declare(devices.CommandKind{Name: agentproto.CommandElevationDecision, Validate: validateDecision, DefaultTimeout: 60,
		MaxTimeout: 600, OS: []string{agentproto.OSLinux},
		PayloadDoc: "Sent by privileged access management: {localId, requestId, decision, reason, expiresAt, grant, user, path}."})
	k.Declare(agenthub.Message{Type: agentproto.TypeElevationRequest, Handle: s.HandleReport})
	s.Register(k.HTTP)
	k.Every("pam-expire", ExpireEvery, s.Expire)
	k.Provide(s)
	return nil
}}
