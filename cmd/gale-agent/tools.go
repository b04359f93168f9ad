package main

import (
	"path/filepath"

	"gale/internal/agent"
	"gale/internal/agent/systools"
)

// tools returns the system tools the agent answers calls with; they never touch the agent's
// own configuration (its tokens).
func tools(configPath string) agent.Tools {
	return systools.New(systools.Options{ConfigDir: filepath.Dir(configPath)})
}
