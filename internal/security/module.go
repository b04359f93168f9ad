package security

import "gale/internal/module"

// Module serves security.
var Module = module.Module{Name: "security", Build: func(k *module.Kernel) error { return nil }}
