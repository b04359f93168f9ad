package maintenance

import (
	"time"

	"gale/internal/platform/module"
)

// TickEvery is how often the job moves occurrences on and writes them ahead.
const TickEvery = time.Minute

// Module serves maintenance windows: their routes and the job that moves occurrences on. The
// domains whose work a window holds back from its devices (scripts, alerts, automations,
// rollouts, patches, software) are built after it and ask its service (Held).
var Module = module.Module{Name: "maintenance", Build: func(k *module.Kernel) error {
	s := New(k.DB, k.Logger, k.Clock, k.Events.Wake)
	s.Register(k.HTTP)
	k.Every("maintenance-occurrences", TickEvery, s.Tick)
	k.Purge("maintenance-occurrences", s.Purge)
	k.Provide(s)
	return nil
}}
