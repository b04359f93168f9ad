package notifications

import (
	"fmt"
	"log/slog"
	"os"

	"gale/internal/platform/clock"
	"gale/internal/platform/config"
	"gale/internal/platform/module"
)

// pushers builds the push senders the configuration enables: FCM for Android, APNs for iOS.
// None means push is off, which the log says once.
func pushers(cfg config.Config, logger *slog.Logger, clk clock.Clock) (map[string]Pusher, error) {
	out := map[string]Pusher{}
	if cfg.FCMCredentialsFile != "" {
		creds, err := os.ReadFile(cfg.FCMCredentialsFile)
		if err != nil {
			return nil, fmt.Errorf("FCM_CREDENTIALS_FILE: %w", err)
		}
		f, err := NewFCM(FCMConfig{ProjectID: cfg.FCMProjectID, Credentials: creds, Endpoint: cfg.FCMEndpoint, Clock: clk})
		if err != nil {
			return nil, err
		}
		out[PlatformAndroid] = f
	}
	if cfg.APNsKeyFile != "" {
		key, err := os.ReadFile(cfg.APNsKeyFile)
		if err != nil {
			return nil, fmt.Errorf("APNS_KEY_FILE: %w", err)
		}
		a, err := NewAPNs(APNsConfig{Key: key, KeyID: cfg.APNsKeyID, TeamID: cfg.APNsTeamID,
			Topic: cfg.APNsTopic, Endpoint: cfg.APNsEndpoint, Clock: clk})
		if err != nil {
			return nil, err
		}
		out[PlatformIOS] = a
	}
	if len(out) == 0 {
		logger.Info("push notifications are off: set FCM_PROJECT_ID and FCM_CREDENTIALS_FILE (Android) or the APNS_* variables (iOS) to send them")
	} else {
		logger.Info("push notifications are on", "android", out[PlatformAndroid] != nil, "ios", out[PlatformIOS] != nil)
	}
	return out, nil
}

// Module holds users' in-app notifications and phone push tokens: its event consumer writes
// notifications and queues pushes, which its senders send.
var Module = module.Module{Name: "notifications", Build: func(k *module.Kernel) error {
	push, err := pushers(k.Config, k.Logger, k.Clock)
	if err != nil {
		return err
	}
	s := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock, Pushers: push})
	s.Register(k.HTTP)
	k.Consume(s.Consumer())
	k.Worker("push-senders", s.Start, s.Stop)
	k.Purge("notifications", s.Purge)
	k.Provide(s)
	return nil
}}
