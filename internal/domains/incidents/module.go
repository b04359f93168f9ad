package incidents

import (
	"gale/internal/domains/devices"
	"gale/internal/platform/module"
)

// Module serves incident response: the feed and tracked incidents, EDR connectors and the
// poller that reads their findings (every EDR_POLL_EVERY_SECONDS it polls the connectors
// that are due), and the events consumer that opens incidents from critical alerts and
// detected threats.
var Module = module.Module{Name: "incidents", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock, Box: k.Box, Devices: module.Get[*devices.Service](k), Wake: k.Events.Wake},
		Options{AllowPrivateTargets: k.Config.WebhookAllowPrivateTargets})
	s.Register(k.HTTP)
	k.Consume(s.Consumer())
	k.Every("incidents-edr-poll", k.Config.EDRPollEvery, s.PollDue)
	k.Provide(s)
	return nil
}}
