package notifications

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Push platforms.
const (
	PlatformIOS     = "ios"
	PlatformAndroid = "android"
)

// Message is one push to one phone.
type Message struct {
	Token string
	Title string
	Body  string
	// Data are extra key/values for the app (type, resourceType, resourceId, link).
	Data map[string]string
}

// Pusher sends a push through one service (FCM, APNs).
type Pusher interface {
	// Push sends m; an error wrapping ErrInvalidToken means the token is dead and is removed.
	Push(ctx context.Context, m Message) error
}

// ErrInvalidToken is returned (wrapped) by a Pusher when the service reports the token as no
// longer valid (FCM UNREGISTERED, APNs 410 or BadDeviceToken).
var ErrInvalidToken = errors.New("push token is no longer valid")

// Push retry policy: up to maxPushAttempts, waiting pushBackoff × 2^(attempt-1), capped.
const (
	maxPushAttempts = 5
	pushBackoff     = 10 * time.Second
	maxPushBackoff  = 10 * time.Minute
	// pushClaim is how long a claimed message is left alone while it is sent.
	pushClaim = time.Minute
	pushBatch = 100
)

// PushEnabled reports whether any push sender is configured.
func (s *Service) PushEnabled() bool { return len(s.pushers) > 0 }

// TokenInput registers a phone's push token.
type TokenInput struct {
	Token      string `json:"token" minLength:"1" maxLength:"4096" doc:"The FCM registration token or APNs device token."`
	Platform   string `json:"platform" enum:"ios,android"`
	DeviceName string `json:"deviceName,omitempty" maxLength:"200"`
}

// PushToken is a registered token as the API shows it.
type PushToken struct {
	Platform   string    `json:"platform"`
	DeviceName string    `json:"deviceName"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
}

// RegisterToken registers the caller's phone. It is idempotent per token; a token
// registered by another user moves to the caller (the phone changed hands or accounts).
func (s *Service) RegisterToken(ctx context.Context, in TokenInput) (PushToken, error) {
	uid, err := userID(ctx)
	if err != nil {
		return PushToken{}, err
	}
	in.Token, in.DeviceName = strings.TrimSpace(in.Token), strings.TrimSpace(in.DeviceName)
	if in.Token == "" {
		return PushToken{}, apperr.Invalid("token", "token is required")
	}
	if in.Platform != PlatformIOS && in.Platform != PlatformAndroid {
		return PushToken{}, apperr.Invalid("platform", "use ios or android")
	}
	now := s.clock.Now()
	var out PushToken
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO push_tokens (token, user_id, platform, device_name, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (token) DO UPDATE SET user_id = excluded.user_id, platform = excluded.platform,
			device_name = excluded.device_name, updated_at = excluded.updated_at
			RETURNING platform, device_name, created_at, updated_at`, in.Token, uid, in.Platform, in.DeviceName, now).
			Scan(&out.Platform, &out.DeviceName, &out.CreatedAt, &out.UpdatedAt)
	})
	out.CreatedAt, out.UpdatedAt = out.CreatedAt.UTC(), out.UpdatedAt.UTC()
	if err != nil {
		return out, fmt.Errorf("register a push token: %w", err)
	}
	return out, nil
}

// UnregisterToken removes the caller's token; it reports whether one was removed. Another
// user's token is left alone (and reported as not removed).
func (s *Service) UnregisterToken(ctx context.Context, token string) (bool, error) {
	uid, err := userID(ctx)
	if err != nil {
		return false, err
	}
	var n int64
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM push_tokens WHERE token = $1 AND user_id = $2`, strings.TrimSpace(token), uid)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return n > 0, fmt.Errorf("unregister a push token: %w", err)
	}
	return n > 0, nil
}

type pushRow struct {
	notificationID, token, platform        string
	attempts                               int
	title, body, typ, resType, resID, link string
	// live is false when the token no longer belongs to the notification's user.
	live bool
}

// SendDue sends the push messages that are due, each claimed first with a conditional
// update so that of several nodes one sends it. It returns how many were sent.
func (s *Service) SendDue(ctx context.Context) (int, error) {
	if !s.PushEnabled() {
		return 0, nil
	}
	s.sending.Lock()
	defer s.sending.Unlock()
	now := s.clock.Now()
	// A message whose token was unregistered or moved to another user since it was queued is
	// dropped rather than sent (the live column is false).
	due, err := store.QueryAll(ctx, s.db, `SELECT m.notification_id, m.token, m.platform, m.attempts, n.title, n.body, n.type,
		n.resource_type, n.resource_id, n.link, EXISTS (SELECT 1 FROM push_tokens t WHERE t.token = m.token AND t.user_id = n.user_id)
		FROM push_messages m JOIN notifications n ON n.id = m.notification_id
		WHERE m.status = 'pending' AND m.next_attempt_at <= $1 ORDER BY m.next_attempt_at LIMIT $2`, []any{now, pushBatch},
		func(sc store.Scanner) (r pushRow, err error) {
			err = sc.Scan(&r.notificationID, &r.token, &r.platform, &r.attempts, &r.title, &r.body, &r.typ, &r.resType, &r.resID,
				&r.link, &r.live)
			return r, err
		})
	if err != nil {
		return 0, fmt.Errorf("select due pushes: %w", err)
	}
	sent := 0
	var errs []error
	for _, r := range due {
		ok, err := s.sendOne(ctx, r)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			sent++
		}
	}
	return sent, errors.Join(errs...)
}

// sendOne claims, sends and records one message.
func (s *Service) sendOne(ctx context.Context, r pushRow) (bool, error) {
	now := s.clock.Now()
	res, err := s.db.ExecContext(ctx, `UPDATE push_messages SET attempts = attempts + 1, next_attempt_at = $1
		WHERE notification_id = $2 AND token = $3 AND status = 'pending' AND attempts = $4 AND next_attempt_at <= $5`,
		now.Add(pushClaim), r.notificationID, r.token, r.attempts, now)
	if err != nil {
		return false, fmt.Errorf("claim the push of notification %s: %w", r.notificationID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil // another node took it
	}
	attempt := r.attempts + 1
	if !r.live {
		return false, s.finish(ctx, r, "dropped", "the token was unregistered or moved to another user", nil)
	}
	p := s.pushers[r.platform]
	if p == nil {
		return false, s.finish(ctx, r, "failed", "no sender for platform "+r.platform, nil)
	}
	err = p.Push(ctx, Message{Token: r.token, Title: r.title, Body: r.body, Data: map[string]string{"type": r.typ,
		"resourceType": r.resType, "resourceId": r.resID, "link": r.link}})
	switch {
	case err == nil:
		return true, s.finish(ctx, r, "sent", "", nil)
	case errors.Is(err, ErrInvalidToken):
		s.logger.InfoContext(ctx, "push token reported invalid; removed", "platform", r.platform)
		reason := err.Error()
		return false, s.db.Write(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `DELETE FROM push_tokens WHERE token = $1`, r.token); err != nil {
				return fmt.Errorf("remove an invalid push token: %w", err)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE push_messages SET status = 'dropped', last_error = $1
				WHERE token = $2 AND status = 'pending'`, reason, r.token); err != nil {
				return fmt.Errorf("drop the pushes to an invalid token: %w", err)
			}
			return nil
		})
	case attempt >= maxPushAttempts:
		s.logger.WarnContext(ctx, "push failed; giving up", "platform", r.platform, "attempts", attempt, "error", err)
		return false, s.finish(ctx, r, "failed", err.Error(), nil)
	default:
		wait := min(pushBackoff<<(attempt-1), maxPushBackoff)
		next := s.clock.Now().Add(wait)
		return false, s.finish(ctx, r, "pending", err.Error(), &next)
	}
}

func (s *Service) finish(ctx context.Context, r pushRow, status, lastErr string, next *time.Time) error {
	var errVal, sentAt any
	if lastErr != "" {
		errVal = truncate(lastErr, 1000)
	}
	if status == "sent" {
		sentAt = s.clock.Now()
	}
	set := "status = $1, last_error = $2, sent_at = $3"
	args := []any{status, errVal, sentAt, r.notificationID, r.token}
	if next != nil {
		set += ", next_attempt_at = $6"
		args = append(args, *next)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE push_messages SET `+set+` WHERE notification_id = $4 AND token = $5`, args...); err != nil {
		return fmt.Errorf("record the push of notification %s: %w", r.notificationID, err)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// Retention of finished push messages and of notifications.
const (
	PushRetention         = 7 * 24 * time.Hour
	NotificationRetention = 90 * 24 * time.Hour
)

// Purge deletes push messages finished more than PushRetention ago and notifications older
// than NotificationRetention (read or not), with their push messages.
func (s *Service) Purge(ctx context.Context) (int64, error) {
	now := s.clock.Now()
	return s.db.Purge(ctx, "notifications",
		store.Deletion{SQL: `DELETE FROM push_messages WHERE status <> 'pending' AND created_at < $1`, Args: []any{now.Add(-PushRetention)}},
		store.Deletion{SQL: `DELETE FROM notifications WHERE created_at < $1`, Args: []any{now.Add(-NotificationRetention)}})
}
