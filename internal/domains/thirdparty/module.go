package thirdparty

import (
	"time"

	"gale/internal/platform/module"
)

// Module serves the third-party catalog and runs its smoke tests, looking for queued ones
// every 5 seconds.
var Module = module.Module{Name: "thirdparty", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Clock: k.Clock}, Options{})
	s.Register(k.HTTP)
	k.Every("third-party-smoke-tests", 5*time.Second, s.RunQueued)
	k.Provide(s)
	return nil
}}
