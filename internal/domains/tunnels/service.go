package tunnels

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/auth"
	"gale/internal/domains/authtickets"
	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
	"gale/internal/wire/streams"
)

// Agents opens streams to devices' agents; *agenthub.Hub is one.
type Agents interface {
	// LiveChannel reports whether the device's agent holds its live channel on any node.
	LiveChannel(ctx context.Context, deviceID string) (bool, error)
	// OpenStream opens a stream of kind to the device's agent, from any node.
	OpenStream(ctx context.Context, deviceID, kind string, args any) (*streams.Stream, error)
}

// Options are the tunnel settings of the server configuration.
type Options struct {
	// AllowDeviceLocal lets tunnels name loopback and link-local addresses of their device
	// (TUNNEL_ALLOW_DEVICE_LOCAL).
	AllowDeviceLocal bool
	// MaxResponseBytes caps one answer through a tunnel, and one request body; 0 means 100 MiB.
	MaxResponseBytes int64
	// ResponseTimeout is how long the target may take to send its response headers; 0 means
	// 60 seconds.
	ResponseTimeout time.Duration
	// PublicURL is the server's address, the base of the URL an http-ticket answers.
	PublicURL string
	// CookieKey signs the proxy's cookies (see CookieKey).
	CookieKey []byte
}

// Deps is what the tunnel service is built from.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	// Clock is the time tunnels, tickets and cookies expire on; nil: the system clock.
	Clock   clock.Clock
	Devices *devices.Service
	Agents  Agents
	Tickets *authtickets.Service
	// Audit records the issue of tickets, outside a transaction.
	Audit *audit.Log
	// Auth turns a ticket's user into the principal the proxied requests run as.
	Auth *auth.Service
}

// Service keeps tunnels and serves their proxy.
type Service struct {
	db        *store.DB
	auth      *auth.Service
	devices   *devices.Service
	agents    Agents
	tickets   *authtickets.Service
	audit     *audit.Log
	logger    *slog.Logger
	opts      Options
	clock     clock.Clock
	transport *http.Transport
}

// New returns the tunnel service.
func New(d Deps, opts Options) *Service {
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = 100 << 20
	}
	if opts.ResponseTimeout <= 0 {
		opts.ResponseTimeout = 60 * time.Second
	}
	s := &Service{db: d.DB, auth: d.Auth, devices: d.Devices, agents: d.Agents, tickets: d.Tickets, audit: d.Audit, logger: d.Logger, opts: opts,
		clock: clock.Or(d.Clock)}
	s.transport = s.newTransport()
	return s
}

// closeIdle closes the proxy's idle connections, at shutdown.
func (s *Service) closeIdle() { s.transport.CloseIdleConnections() }

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }

const columns = `t.id, t.partner_id, t.org_id, t.device_id, t.target_host, t.target_port, t.scheme, t.insecure_tls,
	t.created_by, t.created_at, t.expires_at, t.closed_at, t.closed_by`

// scanner returns the scan function of a tunnel row, whose status it decides at now.
func scanner(now time.Time) func(store.Scanner) (Tunnel, error) {
	return func(sc store.Scanner) (Tunnel, error) {
		var t Tunnel
		var createdBy, closedBy sql.NullString
		var closedAt sql.NullTime
		if err := sc.Scan(&t.ID, &t.PartnerID, &t.OrgID, &t.DeviceID, &t.TargetHost, &t.TargetPort, &t.Scheme, &t.InsecureTLS,
			&createdBy, &t.CreatedAt, &t.ExpiresAt, &closedAt, &closedBy); err != nil {
			return t, err
		}
		t.CreatedBy, t.ClosedBy, t.ClosedAt = store.StringPtr(createdBy), store.StringPtr(closedBy), store.TimePtr(closedAt)
		t.CreatedAt, t.ExpiresAt = t.CreatedAt.UTC(), t.ExpiresAt.UTC()
		switch {
		case t.ClosedAt != nil:
			t.Status = StatusClosed
		case !t.ExpiresAt.After(now):
			t.Status = StatusExpired
		default:
			t.Status = StatusOpen
		}
		return t, nil
	}
}

// get returns the tunnel if scope reaches its organization, which is live.
func (s *Service) get(ctx context.Context, q store.Querier, scope access.Scope, id string) (Tunnel, error) {
	var a store.Args
	return store.ByID(ctx, q, "tunnel", `SELECT `+columns+` FROM tunnels t`, "t.id", id, &a,
		[]string{scope.OrgFilter(&a, "t.org_id", "t.partner_id"), tenancy.LiveOrg("t.org_id")}, scanner(s.now()))
}

// Get returns a tunnel in scope.
func (s *Service) Get(ctx context.Context, id string) (Tunnel, error) {
	return s.get(ctx, s.db, access.ScopeFrom(ctx), id)
}

// ListFilter narrows a list of tunnels.
type ListFilter struct {
	DeviceID string
	Status   string // open, closed or expired; empty for all
}

// List lists the tunnels in scope, newest first.
func (s *Service) List(ctx context.Context, f ListFilter, page store.Page) ([]Tunnel, string, *int, error) {
	now := s.now()
	var a store.Args
	conds := []string{access.ScopeFrom(ctx).OrgFilter(&a, "t.org_id", "t.partner_id"), tenancy.LiveOrg("t.org_id")}
	if f.DeviceID != "" {
		conds = append(conds, "t.device_id = "+a.Add(f.DeviceID))
	}
	switch f.Status {
	case StatusOpen:
		conds = append(conds, "t.closed_at IS NULL AND t.expires_at > "+a.Add(now))
	case StatusExpired:
		conds = append(conds, "t.closed_at IS NULL AND t.expires_at <= "+a.Add(now))
	case StatusClosed:
		conds = append(conds, "t.closed_at IS NOT NULL")
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: columns, From: " FROM tunnels t", Conds: conds, Args: &a,
		SortKey: "t.id", SortID: "t.id", Desc: true}, page, scanner(now), func(t Tunnel) (string, string) { return t.ID, t.ID })
}

// Create opens a tunnel to a target on the device's network.
func (s *Service) Create(ctx context.Context, in NewTunnel) (Tunnel, error) {
	host, err := validate(in, s.opts.AllowDeviceLocal)
	if err != nil {
		return Tunnel{}, err
	}
	if !store.ValidID(in.DeviceID) {
		return Tunnel{}, apperr.NotFound("device")
	}
	d, err := s.devices.Get(ctx, in.DeviceID)
	if err != nil {
		return Tunnel{}, err
	}
	if d.DecommissionedAt != nil {
		return Tunnel{}, apperr.NotFound("device")
	}
	ttl := DefaultTTL
	if in.TTLMinutes > 0 {
		ttl = time.Duration(in.TTLMinutes) * time.Minute
	}
	scope, p := access.ScopeFrom(ctx), access.PrincipalFrom(ctx)
	var out Tunnel
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, scope, d.OrgID, tenancy.PlaceOptions{Noun: "tunnel"})
		if err != nil {
			return err
		}
		id, now := store.NewID(), s.now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO tunnels (id, partner_id, org_id, device_id, target_host, target_port, scheme,
			insecure_tls, created_by, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			id, at.PartnerID, at.OrgID, d.ID, host, in.TargetPort, in.Scheme, in.InsecureTLS, store.NullIfEmpty(p.UserID),
			now, now.Add(ttl)); err != nil {
			return fmt.Errorf("insert tunnel: %w", err)
		}
		if out, err = s.get(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "tunnel.create", ResourceType: "tunnel", ResourceID: id,
			ResourceName: d.Hostname, PartnerID: out.PartnerID, OrgID: out.OrgID, Details: auditView(out)})
	})
	if err != nil {
		return out, fmt.Errorf("create tunnel: %w", err)
	}
	return out, nil
}

func auditView(t Tunnel) map[string]any {
	return map[string]any{"deviceId": t.DeviceID, "targetHost": t.TargetHost, "targetPort": t.TargetPort,
		"scheme": t.Scheme, "insecureTls": t.InsecureTLS, "expiresAt": t.ExpiresAt}
}

// Close closes a tunnel in scope: its proxy answers 404 TUNNEL_CLOSED from then on. A tunnel
// closed already is a 409 TUNNEL_CLOSED.
func (s *Service) Close(ctx context.Context, id string) error {
	scope, p := access.ScopeFrom(ctx), access.PrincipalFrom(ctx)
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		t, err := s.get(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE tunnels SET closed_at = $1, closed_by = $2 WHERE id = $3 AND closed_at IS NULL`,
			s.now(), store.NullIfEmpty(p.UserID), id)
		if err != nil {
			return fmt.Errorf("close tunnel %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return err
			}
			return apperr.ConflictCode(CodeClosed, "the tunnel is closed already")
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "tunnel.delete", ResourceType: "tunnel", ResourceID: id,
			ResourceName: t.TargetHost, PartnerID: t.PartnerID, OrgID: t.OrgID, Details: auditView(t)})
	})
	if err != nil {
		return fmt.Errorf("close tunnel: %w", err)
	}
	// Kept-alive connections to the closed tunnel's target end now rather than when idle.
	s.transport.CloseIdleConnections()
	return nil
}

// ticketKind is the tickets' kind of an http-ticket; its subject is the tunnel.
const ticketKind = "tunnel.http"

// IssueTicket issues an http-ticket for an open tunnel in scope, bound to the calling user.
func (s *Service) IssueTicket(ctx context.Context, id string) (Ticket, error) {
	t, err := s.get(ctx, s.db, access.ScopeFrom(ctx), id)
	if err != nil {
		return Ticket{}, err
	}
	if t.Status != StatusOpen {
		return Ticket{}, apperr.ConflictCode(CodeClosed, "the tunnel is "+t.Status)
	}
	p := access.PrincipalFrom(ctx)
	if p == nil || p.UserID == "" {
		return Ticket{}, apperr.Forbidden("a tunnel's ticket is issued to a user")
	}
	raw, expires, err := s.tickets.Issue(ctx, ticketKind, t.ID, p.UserID, TicketTTL)
	if err != nil {
		return Ticket{}, fmt.Errorf("issue a ticket for tunnel %s: %w", t.ID, err)
	}
	if err := s.audit.RecordAction(ctx, audit.Entry{Action: "tunnel.http_ticket", ResourceType: "tunnel", ResourceID: t.ID,
		ResourceName: t.TargetHost, PartnerID: t.PartnerID, OrgID: t.OrgID, Category: audit.CategorySecurity}); err != nil {
		return Ticket{}, fmt.Errorf("audit the ticket of tunnel %s: %w", t.ID, err)
	}
	return Ticket{Ticket: raw, ExpiresAt: expires,
		URL: s.opts.PublicURL + ProxyPath(t.ID) + "?" + TicketParam + "=" + url.QueryEscape(raw)}, nil
}

// ProxyPath is the root of a tunnel's proxy, with its final slash.
func ProxyPath(tunnelID string) string { return httpapi.Prefix + "/tunnel-http/" + tunnelID + "/" }

// purge deletes tunnels closed or expired more than 30 days ago.
func (s *Service) purge(ctx context.Context) (int64, error) {
	var n int64
	before := s.now().Add(-30 * 24 * time.Hour)
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM tunnels WHERE closed_at < $1 OR expires_at < $1`, before)
		if err != nil {
			return fmt.Errorf("purge tunnels: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
