package pam

import "gale/internal/module"

// Module serves pam.
var Module = module.Module{Name: "pam", Build: func(k *module.Kernel) error { return nil }}
