package search

import "gale/internal/platform/module"

// Module serves /search and /tags.
var Module = module.Module{Name: "search", Build: func(k *module.Kernel) error {
	New(Deps{DB: k.DB, Logger: k.Logger}).Register(k.HTTP)
	return nil
}}
