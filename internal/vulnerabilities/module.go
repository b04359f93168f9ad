package vulnerabilities

import "gale/internal/module"

// Module serves vulnerabilities.
var Module = module.Module{Name: "vulnerabilities", Build: func(k *module.Kernel) error { return nil }}
