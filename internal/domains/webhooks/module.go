package webhooks

import (
	"gale/internal/platform/module"
)

// Module serves outbound webhook subscriptions and sends their deliveries.
var Module = module.Module{Name: "webhooks", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Logger: k.Logger, Box: k.Box, Clock: k.Clock},
		Options{AllowPrivateTargets: k.Config.WebhookAllowPrivateTargets, Workers: k.Config.WebhookSenders})
	s.Register(k.HTTP)
	k.Consume(s.Consumer())
	k.Worker("webhook-senders", s.Start, s.Stop)
	k.Purge("webhook-deliveries", s.Purge)
	k.Provide(s)
	return nil
}}
