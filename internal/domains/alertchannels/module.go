package alertchannels

import (
	"time"

	"gale/internal/domains/alerts"
	"gale/internal/platform/module"
)

// Module serves notification channels and alert policies, sends alert notifications and
// escalates unacknowledged alerts.
var Module = module.Module{Name: "notify", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Logger: k.Logger, Box: k.Box, Mailer: k.Mail, Clock: k.Clock},
		Options{AllowPrivateTargets: k.Config.WebhookAllowPrivateTargets, PublicURL: k.Config.PublicURL})
	s.Register(k.HTTP)
	k.Consume(s.Consumer())
	k.Declare(alerts.ChannelCheck{Check: checkChannels})
	k.Worker("notification-senders", s.Start, s.Stop)
	k.Every("alerts-escalate", time.Minute, s.Escalate)
	k.Purge("notification-deliveries", s.Purge)
	k.Provide(s)
	return nil
}}
