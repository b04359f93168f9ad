package audit

import "gale/internal/platform/module"

// Module serves the audit log and records the server's security refusals in it.
var Module = module.Module{Name: "audit", Build: func(k *module.Kernel) error {
	l := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock})
	l.Register(k.HTTP)
	k.HTTP.SetSecurityRecorder(l)
	k.Provide(l)
	return nil
}}
