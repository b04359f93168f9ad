package discovery

import "gale/internal/module"

// Module serves the discovery domain.
var Module = module.Module{Name: "discovery", Build: func(k *module.Kernel) error {
	return nil
}}
