package authtickets

import "gale/internal/platform/module"

// Module provides the single-use tickets other domains issue and redeem.
var Module = module.Module{Name: "tickets", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Clock: k.Clock})
	k.Provide(s)
	k.Purge("tickets", s.purge)
	return nil
}}
