// Package notifications holds the in-app notifications of users and the push tokens of their
// phones. The "inapp" event consumer turns alert events into one notification per user who
// may see the alert (active, scope reaching its organization, a role granting alerts:read)
// and queues a push message per registered phone of those users; a worker sends the pushes
// through FCM or APNs with retries. Every route acts for the signed-in user only.
package notifications

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/senders"
	"gale/internal/platform/store"
)

// Service is the notifications domain.
type Service struct {
	db     *store.DB
	logger *slog.Logger
	// pushers send pushes per platform (ios, android); a platform without one gets no push.
	pushers map[string]Pusher
	// sending keeps SendDue calls of this node from overlapping.
	sending sync.Mutex
	// senders is this node's push sender (Start).
	senders *senders.Pool
	clock   clock.Clock
}

// Deps is what the notifications service is built from.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	// Clock is the time notifications are made and pushes are due on; nil: the system clock.
	Clock clock.Clock
	// Pushers maps a platform (ios, android) to its push sender; empty: push is off.
	Pushers map[string]Pusher
}

// New returns the notifications service.
func New(d Deps) *Service {
	pushers := d.Pushers
	if pushers == nil {
		pushers = map[string]Pusher{}
	}
	s := &Service{db: d.DB, logger: d.Logger, pushers: pushers, clock: clock.Or(d.Clock)}
	s.senders = senders.New("push sending", d.Logger, 1, pushPollEvery, s.SendDue)
	return s
}

// Notification is one in-app notification of a user.
type Notification struct {
	ID           string     `json:"id" format:"uuid"`
	UserID       string     `json:"userId" format:"uuid"`
	Type         string     `json:"type" doc:"The event that made it: alert.triggered, alert.acknowledged, alert.resolved, alert.suppressed, alert.dismissed."`
	Title        string     `json:"title"`
	Body         string     `json:"body"`
	Severity     *string    `json:"severity" enum:"critical,high,medium,low,info"`
	ResourceType string     `json:"resourceType" doc:"alert"`
	ResourceID   string     `json:"resourceId"`
	Link         string     `json:"link" doc:"API path of the resource, e.g. /alerts/{id}."`
	ReadAt       *time.Time `json:"readAt"`
	CreatedAt    time.Time  `json:"createdAt"`
}

const columns = `n.id, n.user_id, n.type, n.title, n.body, n.severity, n.resource_type, n.resource_id, n.link, n.read_at, n.created_at`

// unqualified are columns without the alias, for RETURNING.
var unqualified = strings.ReplaceAll(columns, "n.", "")

func scan(row store.Scanner) (Notification, error) {
	var n Notification
	var sev sql.NullString
	var readAt sql.NullTime
	err := row.Scan(&n.ID, &n.UserID, &n.Type, &n.Title, &n.Body, &sev, &n.ResourceType, &n.ResourceID, &n.Link, &readAt, &n.CreatedAt)
	n.Severity = store.StringPtr(sev)
	if readAt.Valid {
		t := readAt.Time.UTC()
		n.ReadAt = &t
	}
	n.CreatedAt = n.CreatedAt.UTC()
	return n, err
}

// userID returns the signed-in user of the request; other callers (API keys, service
// principals) have no notifications and get 403.
func userID(ctx context.Context) (string, error) {
	p := access.PrincipalFrom(ctx)
	if p == nil || p.Kind != access.ActorUser || p.UserID == "" {
		return "", apperr.Forbidden("notifications belong to signed-in users; API keys have none")
	}
	return p.UserID, nil
}

// visible renders the conditions of the caller's notifications it may still see: its own,
// of organizations still in its scope, and about alerts only while it holds alerts:read (a
// user whose access narrowed no longer sees what it was told before).
func visible(ctx context.Context, a *store.Args) ([]string, error) {
	uid, err := userID(ctx)
	if err != nil {
		return nil, err
	}
	conds := []string{"n.user_id = " + a.Add(uid), access.ScopeFrom(ctx).OrgFilter(a, "n.org_id", "n.partner_id")}
	if !access.PrincipalFrom(ctx).Can(access.AlertsRead) {
		conds = append(conds, "n.resource_type <> 'alert'")
	}
	return conds, nil
}

// List returns the caller's notifications, newest first; unreadOnly keeps unread ones.
func (s *Service) List(ctx context.Context, unreadOnly bool, page store.Page) ([]Notification, string, *int, error) {
	var a store.Args
	conds, err := visible(ctx, &a)
	if err != nil {
		return nil, "", nil, err
	}
	if unreadOnly {
		conds = append(conds, "n.read_at IS NULL")
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: columns, From: " FROM notifications n", Conds: conds, Args: &a,
		SortKey: "n.id", SortID: "n.id", Desc: true}, page, scan, func(n Notification) (string, string) { return n.ID, n.ID })
}

// UnreadCount counts the caller's unread notifications.
func (s *Service) UnreadCount(ctx context.Context) (int, error) {
	var a store.Args
	conds, err := visible(ctx, &a)
	if err != nil {
		return 0, err
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM notifications n WHERE `+store.Where(conds)+` AND n.read_at IS NULL`,
		a.Values()...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count unread notifications: %w", err)
	}
	return n, nil
}

// MarkRead marks one of the caller's notifications read (read true) or unread. Another
// user's notification is 404.
func (s *Service) MarkRead(ctx context.Context, id string, read bool) (Notification, error) {
	var a store.Args
	conds, err := visible(ctx, &a)
	if err != nil {
		return Notification{}, err
	}
	if !store.ValidID(id) {
		return Notification{}, apperr.NotFound("notification")
	}
	set := "read_at = NULL"
	if read {
		set = "read_at = COALESCE(read_at, " + a.Add(s.clock.Now()) + ")"
	}
	var out Notification
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		// Marking read keeps the first read time.
		n, err := scan(tx.QueryRowContext(ctx, `UPDATE notifications SET `+set+` WHERE id IN (SELECT n.id FROM notifications n WHERE n.id = `+
			a.Add(id)+` AND `+store.Where(conds)+`) RETURNING `+unqualified, a.Values()...))
		if errors.Is(err, sql.ErrNoRows) {
			return apperr.NotFound("notification")
		}
		if err != nil {
			return fmt.Errorf("mark notification %s: %w", id, err)
		}
		out = n
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("mark notification: %w", err)
	}
	return out, nil
}

// Delete removes one of the caller's notifications.
func (s *Service) Delete(ctx context.Context, id string) error {
	var a store.Args
	conds, err := visible(ctx, &a)
	if err != nil {
		return err
	}
	if !store.ValidID(id) {
		return apperr.NotFound("notification")
	}
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM notifications WHERE id IN (SELECT n.id FROM notifications n WHERE n.id = `+
			a.Add(id)+` AND `+store.Where(conds)+`)`, a.Values()...)
		if err != nil {
			return fmt.Errorf("delete notification %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return apperr.NotFound("notification")
		}
		return nil
	})
}

// Clear removes all the caller's notifications and returns how many.
func (s *Service) Clear(ctx context.Context) (int, error) {
	uid, err := userID(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM notifications WHERE user_id = $1`, uid)
		if err != nil {
			return fmt.Errorf("clear the notifications of user %s: %w", uid, err)
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return int(n), fmt.Errorf("clear notifications: %w", err)
	}
	return int(n), nil
}

// UnreadFor counts the unread notifications of the signed-in caller, zero for other callers
// (the mobile summary).
func (s *Service) UnreadFor(ctx context.Context) (int, error) {
	if _, err := userID(ctx); err != nil {
		return 0, nil
	}
	return s.UnreadCount(ctx)
}
