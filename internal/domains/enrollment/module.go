package enrollment

import "gale/internal/platform/module"

// Module serves enrollment keys.
var Module = module.Module{Name: "enrollment", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock}, Options{DefaultTTL: k.Config.EnrollmentKeyDefaultTTL})
	s.Register(k.HTTP)
	k.Provide(s)
	return nil
}}
