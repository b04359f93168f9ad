package enrollment

import "gale/internal/platform/module"

// Module serves enrollment keys.
var Module = module.Module{Name: "enrollment", Build: func(k *module.Kernel) error {
	s := New(k.DB, k.Logger, Options{DefaultTTL: k.Config.EnrollmentKeyDefaultTTL, Clock: k.Clock})
	s.Register(k.HTTP)
	k.Provide(s)
	return nil
}}
