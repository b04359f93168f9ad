package alertchannels

import (
	"context"
	"errors"

	"gale/internal/platform/mail"
)

// sendEmail mails the plain-text notification to the channel's recipients over SMTP.
func (s *Service) sendEmail(ctx context.Context, cfg ChannelConfig, n Notification) outcome {
	if s.mailer == nil {
		return outcome{err: errors.New("mail is not configured on this server (SMTP_URL)").Error()}
	}
	err := s.mailer.Send(ctx, mail.Message{To: cfg.Recipients, Subject: truncate(n.headline(), 200), Body: n.text()})
	if err != nil {
		return outcome{err: err.Error()}
	}
	return outcome{}
}
