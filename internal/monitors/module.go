package monitors

import "gale/internal/module"

// Module serves the monitors domain.
var Module = module.Module{Name: "monitors", Build: func(k *module.Kernel) error {
	return nil
}}
