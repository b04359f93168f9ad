package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"time"

	"gale/internal/agent/inventory"
	"gale/internal/agent/outbox"
	"gale/internal/wire/agentproto"
)

// EnrollOptions are the arguments of `gale-agent enroll`.
type EnrollOptions struct {
	Key        string
	Server     string
	Secret     string
	SiteID     string
	ConfigPath string
	Version    string
	// Force enrolls anew even over a valid configuration.
	Force bool
	// Replaced is called with the reason when enroll replaces an existing configuration.
	Replaced func(reason string)
}

// ErrAlreadyEnrolled means a valid configuration file exists: enroll did nothing.
var ErrAlreadyEnrolled = errors.New("already enrolled")

// Enroll registers this machine with the server and writes the configuration file. When a
// valid configuration exists it does nothing and returns ErrAlreadyEnrolled, so repeated runs
// of an install script are safe. A configuration that cannot be read (damaged, incomplete)
// or of a decommissioned device is replaced, as is any with Force: enrolling is how such a
// machine is repaired. The outbox of the earlier enrollment is cleared; it belongs to
// another device.
func Enroll(ctx context.Context, o EnrollOptions) (Config, error) {
	if Enrolled(o.ConfigPath) {
		old, err := LoadConfig(o.ConfigPath)
		reason := ""
		switch {
		case err != nil:
			reason = fmt.Sprintf("the configuration cannot be used (%v)", err)
		case old.Decommissioned:
			reason = "the device " + old.DeviceID + " was decommissioned"
		case o.Force:
			reason = "--force: replacing the enrollment of device " + old.DeviceID
		default:
			return Config{}, ErrAlreadyEnrolled
		}
		if o.Replaced != nil {
			o.Replaced(reason)
		}
	}
	u, err := url.Parse(o.Server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Config{}, fmt.Errorf("--server must be the server's base address, like https://rmm.example.com")
	}
	server := strings.TrimSuffix(strings.TrimRight(o.Server, "/"), "/api/v1")
	inv := inventory.Collect(ctx, inventory.Options{})
	req := agentproto.EnrollRequest{EnrollmentKey: o.Key, EnrollmentSecret: o.Secret, SiteID: o.SiteID,
		Hostname: inv.Hostname, OSType: osType(), OSVersion: inv.OS.Version, Architecture: runtime.GOARCH,
		AgentVersion: o.Version, Hardware: &inv.Hardware}
	if req.Hostname == "" {
		req.Hostname, _ = os.Hostname()
	}
	var resp agentproto.EnrollResponse
	c := newClient(server, "")
	if err := c.do(ctx, http.MethodPost, apiPath(agentproto.PathEnroll), req, &resp, nil); err != nil {
		return Config{}, fmt.Errorf("enrollment refused: %w", err)
	}
	cfg := Config{Server: server, DeviceID: resp.DeviceID, AuthToken: resp.AuthToken, WatchdogToken: resp.WatchdogAuthToken,
		OrgID: resp.OrgID, SiteID: resp.SiteID, Settings: resp.Config, EnrolledAt: time.Now().UTC()}
	if err := SaveConfig(o.ConfigPath, cfg); err != nil {
		return cfg, fmt.Errorf("enrolled as device %s but could not write %s: %w", resp.DeviceID, o.ConfigPath, err)
	}
	if err := outbox.Clear(OutboxDir(o.ConfigPath)); err != nil {
		return cfg, fmt.Errorf("enrolled as device %s: %w", resp.DeviceID, err)
	}
	return cfg, nil
}

func osType() string {
	switch runtime.GOOS {
	case "windows":
		return agentproto.OSWindows
	case "darwin":
		return agentproto.OSMacOS
	default:
		return agentproto.OSLinux
	}
}
