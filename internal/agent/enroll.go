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
	"gale/internal/agentproto"
)

// EnrollOptions are the arguments of `gale-agent enroll`.
type EnrollOptions struct {
	Key        string
	Server     string
	Secret     string
	SiteID     string
	ConfigPath string
	Version    string
}

// ErrAlreadyEnrolled means a configuration file exists: enroll did nothing.
var ErrAlreadyEnrolled = errors.New("already enrolled")

// Enroll registers this machine with the server and writes the configuration file. When the
// file already exists it does nothing and returns ErrAlreadyEnrolled, so repeated runs of an
// install script are safe.
func Enroll(ctx context.Context, o EnrollOptions) (Config, error) {
	if Enrolled(o.ConfigPath) {
		return Config{}, ErrAlreadyEnrolled
	}
	u, err := url.Parse(o.Server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Config{}, fmt.Errorf("--server must be the server's base address, like https://rmm.example.com")
	}
	server := strings.TrimSuffix(strings.TrimRight(o.Server, "/"), "/api/v1")
	inv := inventory.Collect(ctx)
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
