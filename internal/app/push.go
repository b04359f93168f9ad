package app

import (
	"fmt"
	"log/slog"
	"os"

	"gale/internal/config"
	"gale/internal/notifications"
)

// pushers builds the push senders the configuration enables: FCM for Android, APNs for iOS.
// None means push is off, which the log says once.
func pushers(cfg config.Config, logger *slog.Logger) (map[string]notifications.Pusher, error) {
	out := map[string]notifications.Pusher{}
	if cfg.FCMCredentialsFile != "" {
		creds, err := os.ReadFile(cfg.FCMCredentialsFile)
		if err != nil {
			return nil, fmt.Errorf("FCM_CREDENTIALS_FILE: %w", err)
		}
		f, err := notifications.NewFCM(notifications.FCMConfig{ProjectID: cfg.FCMProjectID, Credentials: creds, Endpoint: cfg.FCMEndpoint})
		if err != nil {
			return nil, err
		}
		out[notifications.PlatformAndroid] = f
	}
	if cfg.APNsKeyFile != "" {
		key, err := os.ReadFile(cfg.APNsKeyFile)
		if err != nil {
			return nil, fmt.Errorf("APNS_KEY_FILE: %w", err)
		}
		a, err := notifications.NewAPNs(notifications.APNsConfig{Key: key, KeyID: cfg.APNsKeyID, TeamID: cfg.APNsTeamID,
			Topic: cfg.APNsTopic, Endpoint: cfg.APNsEndpoint})
		if err != nil {
			return nil, err
		}
		out[notifications.PlatformIOS] = a
	}
	if len(out) == 0 {
		logger.Info("push notifications are off: set FCM_PROJECT_ID and FCM_CREDENTIALS_FILE (Android) or the APNS_* variables (iOS) to send them")
	} else {
		logger.Info("push notifications are on", "android", out[notifications.PlatformAndroid] != nil, "ios", out[notifications.PlatformIOS] != nil)
	}
	return out, nil
}
