package main

import (
	"path/filepath"

	"gale/internal/agent/capability"
	"gale/internal/agent/desktop"
	"gale/internal/agent/echo"
	"gale/internal/agent/power"
	"gale/internal/agent/script"
	"gale/internal/agent/systools"
	"gale/internal/agent/terminal"
	"gale/internal/agent/tunnel"
)

// capabilities returns what this agent binary can do, one capability package a line. The
// system tools never touch the agent's own configuration (its tokens).
func capabilities(configPath string) *capability.Registry {
	reg := capability.New()
	echo.Register(reg)
	power.New(power.Options{StatePath: power.StatePath(configPath), Logger: logger()}).Register(reg)
	script.Register(reg)
	systools.New(systools.Options{ConfigDir: filepath.Dir(configPath)}).Register(reg)
	terminal.Register(reg)
	desktop.New().Register(reg)
	tunnel.Register(reg)
	return reg
}
