package agentdist

import "gale/internal/platform/module"

// Module keeps the released agent binaries and serves them to endpoints.
var Module = module.Module{Name: "agentdist", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock}, Options{PublicURL: k.Config.PublicURL})
	s.RegisterRoutes(k.HTTP)
	k.Provide(s)
	return nil
}}
