package configpolicies

import (
	"time"

	"gale/internal/domains/alerts"
	"gale/internal/domains/devices"
	"gale/internal/domains/scripts"
	"gale/internal/platform/access"
	"gale/internal/platform/module"
	"gale/internal/platform/partnerexport"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// Module serves configuration policies: their routes, the policy_evaluate command kind, the
// evaluation schedule, each node's follow-up worker and the partner-API exports.
var Module = module.Module{Name: "policies", Build: func(k *module.Kernel) error {
	dev := module.Get[*devices.Service](k)
	s := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock, Devices: dev, Scripts: module.Get[*scripts.Service](k),
		Alerts: module.Get[*alerts.Service](k)})
	k.Declare(s.commandKind())
	k.Declare(devices.ResultHook{Kind: agentproto.CommandRunScript, Run: s.onRemediationResult})
	s.Register(k.HTTP)
	k.Every("policy-evaluations", ScheduleEvery, s.RunSchedule)
	k.Worker("policy-follow-ups", s.StartWorker, s.StopWorker)
	k.Provide(s)
	k.Declare(partnerexport.Export[Policy]{Name: "configuration-policies", Scope: access.ConfigurationRead,
		Summary: "Export configuration policies", Fetch: s.ExportPolicies,
		Description: "Partner-wide policies and those of the partner's organizations, with their rules and targets.",
		Key:         func(p Policy) (time.Time, []string) { return p.UpdatedAt, []string{p.ID} }})
	k.Declare(partnerexport.Export[PolicyAssignment]{Name: "configuration-assignments", Scope: access.ConfigurationRead,
		Summary: "Export policy assignments", Fetch: s.ExportAssignments,
		Description: "One row per policy and target; targetId null: every organization in the policy's scope. A changed target list replaces the policy's rows.",
		Key: func(x PolicyAssignment) (time.Time, []string) {
			return x.AssignedAt, []string{x.PolicyID, store.Deref(x.TargetID)}
		}})
	return nil
}}
