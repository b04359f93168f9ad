// Package agent is gale-agent: enrollment, the live channel to the server, heartbeats,
// inventory, command execution, system tools and the watchdog that keeps it all running.
package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"gale/internal/agent/atomicfile"
	"gale/internal/wire/agentproto"
)

// Config is the agent's local state, written at enrollment. Its existence means "enrolled".
type Config struct {
	Server        string            `json:"server"`
	DeviceID      string            `json:"deviceId"`
	AuthToken     string            `json:"authToken"`
	WatchdogToken string            `json:"watchdogToken"`
	OrgID         string            `json:"orgId"`
	SiteID        string            `json:"siteId"`
	Settings      agentproto.Config `json:"settings"`
	EnrolledAt    time.Time         `json:"enrolledAt"`
	// Decommissioned is set when the server, authenticated, said it retired the device (see
	// agentproto.TypeStop); the agent then exits at once with ExitDecommissioned. A refused
	// token never sets it.
	Decommissioned bool `json:"decommissioned,omitempty"`
	// PackageRoot, when set, is the system tree whose packages the agent manages (patch scans
	// and installs, software): a chroot or a container's root. Empty manages the agent's own
	// system. Set by hand; enrollment leaves it empty.
	PackageRoot string `json:"packageRoot,omitempty"`
}

// ExitDecommissioned is the exit status of gale-agent run once the device was decommissioned.
// The system service counts it as a success, so the service manager does not restart the agent.
const ExitDecommissioned = 3

// ErrDecommissioned is returned by Run and Watchdog when the device was decommissioned.
var ErrDecommissioned = errors.New("the server decommissioned this device; enroll again to manage this machine")

// OutboxDir is where the agent of the configuration at configPath keeps what it could not
// deliver yet: next to the configuration, named after it, so several agents on one machine
// keep theirs apart.
func OutboxDir(configPath string) string {
	return strings.TrimSuffix(configPath, filepath.Ext(configPath)) + ".outbox"
}

// DefaultConfigPath is the system location of the configuration file on this platform.
func DefaultConfigPath() string {
	switch runtime.GOOS {
	case "windows":
		dir := os.Getenv("ProgramData")
		if dir == "" {
			dir = `C:\ProgramData`
		}
		return filepath.Join(dir, "Gale", "agent.json")
	case "darwin":
		return "/Library/Application Support/Gale/agent.json"
	default:
		return "/etc/gale-agent/agent.json"
	}
}

// LoadConfig reads the configuration file; fs.ErrNotExist means not enrolled.
func LoadConfig(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("read %s: %w (remove the file and enroll again)", path, err)
	}
	if c.Server == "" || c.DeviceID == "" || c.AuthToken == "" {
		return c, fmt.Errorf("%s is incomplete (remove the file and enroll again)", path)
	}
	return c, nil
}

// Enrolled reports whether a configuration file exists at path.
func Enrolled(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// SaveConfig writes the configuration atomically with mode 0600: it holds the agent's tokens.
func SaveConfig(path string, c Config) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, b, 0o600)
}
