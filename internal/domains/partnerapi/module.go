package partnerapi

import (
	"context"

	"gale/internal/domains/audit"
	"gale/internal/domains/enrollment"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/module"
	"gale/internal/platform/partnerexport"
)

// Module serves partner service principals and the partner API, and purges its idempotency
// records.
var Module = module.Module{Name: "partnerapi", Build: func(k *module.Kernel) error {
	cfg := k.Config
	s := New(Deps{DB: k.DB, Logger: k.Logger, Audit: module.Get[*audit.Log](k), Box: k.Box, Limiter: k.Limiter, Clock: k.Clock,
		Orgs: module.Get[*tenancy.Service](k), Keys: module.Get[*enrollment.Service](k)},
		Options{KeyDefaultTTL: cfg.PartnerAPIEnrollmentKeyDefaultTTL, KeyMaxTTL: cfg.PartnerAPIEnrollmentKeyMaxTTL,
			CursorSecret: cfg.JWTSecret})
	s.Register(k.HTTP)
	k.Purge("idempotencyRecords", s.Purge)
	k.OnReady(func(context.Context) error {
		return s.registerExports(k.HTTP, module.Declared[partnerexport.Declared](k))
	})
	k.Provide(s)
	return nil
}}
