package snmp

import "gale/internal/module"

// Module serves the snmp domain.
var Module = module.Module{Name: "snmp", Build: func(k *module.Kernel) error {
	return nil
}}
