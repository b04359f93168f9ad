package incidents

import "gale/internal/module"

// Module serves incidents.
var Module = module.Module{Name: "incidents", Build: func(k *module.Kernel) error { return nil }}
