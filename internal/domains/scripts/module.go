package scripts

import (
	"time"

	"gale/internal/domains/devices"
	"gale/internal/domains/maintenance"
	"gale/internal/platform/access"
	"gale/internal/platform/module"
	"gale/internal/platform/partnerexport"
	"gale/internal/wire/agentproto"
)

// Module serves scripts, the script library, bundles and executions, and the partner-API export
// of scripts.
var Module = module.Module{Name: "scripts", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock, Devices: module.Get[*devices.Service](k),
		Maintenance: module.Get[*maintenance.Service](k)})
	k.Declare(devices.ResultHook{Kind: agentproto.CommandRunScript, Run: recordOutcome})
	s.Register(k.HTTP)
	k.Provide(s)
	k.Declare(partnerexport.Export[Script]{Name: "scripts", Scope: access.ScriptsRead, Summary: "Export scripts", Fetch: s.ExportScripts,
		Description: "Live scripts, partner-wide ones and those of the partner's organizations, as GET /scripts shows them (content, " +
			"parameters, tags). A deleted script leaves no row.",
		Key: func(sc Script) (time.Time, []string) { return sc.UpdatedAt, []string{sc.ID} }})
	return nil
}}
