package auth

import (
	"context"
	"errors"
	"fmt"

	"gale/internal/domains/audit"
	"gale/internal/domains/identity"
	"gale/internal/platform/access"
	"gale/internal/platform/module"
)

// Module signs users in, authenticates every signed-in operation, purges expired tokens and
// creates the first administrator of an empty database.
var Module = module.Module{Name: "auth", Build: func(k *module.Kernel) error {
	cfg := k.Config
	argon := Argon2Params{MemoryKiB: cfg.Argon2MemoryKiB, Iterations: cfg.Argon2Iterations, Parallelism: cfg.Argon2Parallelism}
	s := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock, Box: k.Box, Limiter: k.Limiter, Audit: module.Get[*audit.Log](k), Mail: k.Mail,
		Users: module.Get[*identity.Service](k), AccessChanged: k.AccessChanged},
		Options{JWTSecret: cfg.JWTSecret, AccessTTL: cfg.AccessTokenTTL, RefreshTTL: cfg.RefreshTokenTTL,
			RefreshFamilyTTL: cfg.RefreshFamilyTTL, ResetTTL: cfg.PasswordResetTTL, Argon2: argon,
			LoginFloor: cfg.LoginResponseFloor, PublicURL: cfg.PublicURL, PrincipalTTL: cfg.AuthCacheTTL})
	s.Register(k.HTTP)
	k.HTTP.SetAuthenticator(s)
	k.Cache(s.ForgetPrincipals)
	k.Purge("refreshTokens", s.Purge)
	k.OnReady(func(ctx context.Context) error {
		if err := s.plug(module.Declared[APIKeyVerifier](k)); err != nil {
			return err
		}
		return s.bootstrapAdmin(ctx, k, argon)
	})
	k.Provide(s)
	return nil
}}

// bootstrapAdmin creates the first system administrator on an empty database when
// BOOTSTRAP_ADMIN_EMAIL and BOOTSTRAP_ADMIN_PASSWORD are set, and otherwise says how to.
func (s *Service) bootstrapAdmin(ctx context.Context, k *module.Kernel, argon Argon2Params) error {
	has, err := s.users.HasUsers(ctx)
	if err != nil || has {
		return err
	}
	cfg := k.Config
	if cfg.BootstrapAdminEmail == "" {
		k.Logger.Warn("the database has no users, so nobody can sign in; restart with BOOTSTRAP_ADMIN_EMAIL and " +
			"BOOTSTRAP_ADMIN_PASSWORD set, or run: gale user create --email you@example.com --system")
		return nil
	}
	if err := CheckPasswordPolicy("BOOTSTRAP_ADMIN_PASSWORD", cfg.BootstrapAdminPassword); err != nil {
		return errors.New("BOOTSTRAP_ADMIN_PASSWORD: needs 8 to 128 characters with a lower-case letter, an upper-case letter and a digit")
	}
	_, err = s.users.CreateUser(ctx, identity.NewUser{Email: cfg.BootstrapAdminEmail, Name: cfg.BootstrapAdminName,
		PasswordHash: HashPassword(cfg.BootstrapAdminPassword, argon), Level: access.LevelSystem})
	if err != nil {
		return fmt.Errorf("create bootstrap administrator: %w", err)
	}
	k.Logger.Info("created the first system administrator", "email", cfg.BootstrapAdminEmail)
	return nil
}
