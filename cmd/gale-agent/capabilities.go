package main

import (
	"path/filepath"

	"gale/internal/agent"
	"gale/internal/agent/capability"
	"gale/internal/agent/configpolicy"
	"gale/internal/agent/desktop"
	"gale/internal/agent/discovery"
	"gale/internal/agent/echo"
	"gale/internal/agent/elevate"
	"gale/internal/agent/netcheck"
	"gale/internal/agent/packages"
	"gale/internal/agent/power"
	"gale/internal/agent/script"
	"gale/internal/agent/security"
	"gale/internal/agent/snmp"
	"gale/internal/agent/systemtools"
	"gale/internal/agent/terminal"
	"gale/internal/agent/tunnel"
)

// capabilities returns what this agent binary can do, one capability package a line. The
// system tools never touch the agent's own configuration (its tokens). An agent not enrolled
// yet has no package root: it manages its own system.
func capabilities(configPath string) *capability.Registry {
	cfg, _ := agent.LoadConfig(configPath)
	reg := capability.New()
	echo.Register(reg)
	netcheck.Register(reg)
	power.New(power.Options{StatePath: power.StatePath(configPath), Logger: logger()}).Register(reg)
	script.Register(reg)
	systemtools.New(systemtools.Options{ConfigDir: filepath.Dir(configPath)}).Register(reg)
	terminal.Register(reg)
	desktop.New().Register(reg)
	tunnel.Register(reg)
	packages.New(packages.Options{Root: cfg.PackageRoot, Fetch: reg.Fetch, Logger: logger()}).Register(reg)
	configpolicy.New(configpolicy.Options{PackageRoot: cfg.PackageRoot}).Register(reg)
	snmp.Register(reg)
	discovery.Register(reg)
	security.New(security.Options{}).Register(reg)
	elevate.New(elevate.OptionsFromEnv(logger())).Register(reg)
	return reg
}
