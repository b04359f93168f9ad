package console

import (
	"strings"

	"gale/internal/domains/alertchannels"
	"gale/internal/domains/alerts"
	"gale/internal/domains/apikeys"
	"gale/internal/domains/audit"
	"gale/internal/domains/auth"
	"gale/internal/domains/automations"
	"gale/internal/domains/devices"
	"gale/internal/domains/discovery"
	"gale/internal/domains/enrollment"
	"gale/internal/domains/groups"
	"gale/internal/domains/identity"
	"gale/internal/domains/maintenance"
	"gale/internal/domains/monitors"
	"gale/internal/domains/patches"
	"gale/internal/domains/remote"
	"gale/internal/domains/scripts"
	"gale/internal/domains/security"
	"gale/internal/domains/systemtools"
	"gale/internal/domains/tenancy"
	"gale/internal/domains/vulnerabilities"
	"gale/internal/domains/webhooks"
	"gale/internal/platform/module"
)

// Module serves the web console at /. It comes after every domain whose pages it shows.
var Module = module.Module{Name: "console", Build: func(k *module.Kernel) error {
	c, err := New(Deps{HTTP: k.HTTP, Logger: k.Logger, Clock: k.Clock, Bus: k.Bus,
		Auth: module.Get[*auth.Service](k), Identity: module.Get[*identity.Service](k), Tenancy: module.Get[*tenancy.Service](k),
		Devices: module.Get[*devices.Service](k), Alerts: module.Get[*alerts.Service](k),
		Scripts: module.Get[*scripts.Service](k), Remote: module.Get[*remote.Service](k),
		Groups: module.Get[*groups.Service](k), Enrollment: module.Get[*enrollment.Service](k),
		Audit: module.Get[*audit.Log](k), APIKeys: module.Get[*apikeys.Service](k),
		SystemTools: module.Get[*systemtools.Service](k),
		Patches:     module.Get[*patches.Service](k), PatchPolicies: module.Get[*patches.Policies](k),
		Security: module.Get[*security.Service](k), Vulnerabilities: module.Get[*vulnerabilities.Service](k),
		Automations: module.Get[*automations.Service](k), Maintenance: module.Get[*maintenance.Service](k),
		Monitors: module.Get[*monitors.Service](k), Discovery: module.Get[*discovery.Service](k),
		Channels: module.Get[*alertchannels.Service](k), Webhooks: module.Get[*webhooks.Service](k)},
		Options{Secret: k.Config.JWTSecret, Idle: k.Config.ConsoleIdleTimeout, SecureCookies: strings.HasPrefix(k.Config.PublicURL, "https://"),
			Version: k.Version, PublicURL: k.Config.PublicURL, KeyTTL: k.Config.EnrollmentKeyDefaultTTL})
	if err != nil {
		return err
	}
	c.Register(k.HTTP)
	k.Bus.Subscribe(liveChannel, c.live.deliver)
	k.Consume(c.consumer())
	k.Provide(c)
	return nil
}}
