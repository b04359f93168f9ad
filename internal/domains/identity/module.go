package identity

import (
	"context"
	"fmt"

	"gale/internal/platform/module"
)

// Module serves users, invitations, roles and access reviews, and seeds the built-in roles.
var Module = module.Module{Name: "identity", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock, Mail: k.Mail}, Options{PublicURL: k.Config.PublicURL, InviteTTL: k.Config.InviteTTL})
	s.Register(k.HTTP)
	k.OnReady(func(ctx context.Context) error {
		if err := s.EnsureBuiltInRoles(ctx); err != nil {
			return fmt.Errorf("seed built-in roles: %w", err)
		}
		return nil
	})
	k.Provide(s)
	return nil
}}
