package maintenance

import (
	"time"

	"gale/internal/domains/devices"
	"gale/internal/platform/module"
)

// TickEvery is how often the job moves occurrences on and writes them ahead.
const TickEvery = time.Minute

// Module serves maintenance windows: their routes and the job that moves occurrences on. The
// domains whose work a window holds back from its devices (scripts, alerts, automations,
// rollouts, patches, software; monitors and SNMP through alerts) are built after it and ask
// its service (Held, or HeldSubject for what belongs to a site or organization).
var Module = module.Module{Name: "maintenance", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock, Wake: k.Events.Wake, Devices: module.Get[*devices.Service](k)})
	s.Register(k.HTTP)
	k.Every("maintenance-occurrences", TickEvery, s.Tick)
	k.Purge("maintenance-occurrences", s.Purge)
	k.Provide(s)
	return nil
}}
