package apikeys

import (
	"gale/internal/domains/auth"
	"gale/internal/platform/module"
)

// Module serves API keys and lets auth accept them.
var Module = module.Module{Name: "apikeys", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock, Auth: module.Get[*auth.Service](k)})
	k.Declare(auth.APIKeyVerifier(s))
	s.Register(k.HTTP)
	k.Provide(s)
	return nil
}}
