package webhooks

import (
	"time"

	"gale/internal/platform/module"
)

// Module serves outbound webhook subscriptions and sends their deliveries.
var Module = module.Module{Name: "webhooks", Build: func(k *module.Kernel) error {
	s := New(k.DB, k.Logger, k.Box, Options{AllowPrivateTargets: k.Config.WebhookAllowPrivateTargets,
		Workers: k.Config.WebhookSenders})
	s.Register(k.HTTP)
	k.Consume(s.Consumer())
	k.Worker("webhook-senders", s.Start, s.Stop)
	k.Every("webhook-deliveries-purge", time.Hour, s.Purge)
	k.Provide(s)
	return nil
}}
