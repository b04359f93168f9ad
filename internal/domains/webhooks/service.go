package webhooks

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/secrets"
	"gale/internal/platform/senders"
	"gale/internal/platform/store"
)

// Deps is what the webhook service is built from.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	// Box seals the signing secrets and extra headers.
	Box *secrets.Box
	// Clock dates subscription changes, attempts and signatures and ages the delivery log; nil:
	// the system clock.
	Clock clock.Clock
}

// Options are the webhook settings of the server configuration.
type Options struct {
	// AllowPrivateTargets lets subscriptions reach loopback, private and link-local
	// addresses (WEBHOOK_ALLOW_PRIVATE_TARGETS); false refuses them at create and at dial time.
	AllowPrivateTargets bool
	// Workers is how many deliveries a node sends at once; 0 means 4.
	Workers int
}

// Service manages subscriptions and sends their deliveries.
type Service struct {
	db     *store.DB
	logger *slog.Logger
	box    *secrets.Box
	opts   Options
	clock  clock.Clock
	client *http.Client
	// senders send the due deliveries.
	senders *senders.Pool
	// node tells this node's claims from others'.
	node string
}

// New returns the webhook service.
func New(d Deps, opts Options) *Service {
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	s := &Service{db: d.DB, logger: d.Logger, box: d.Box, opts: opts, client: newClient(opts.AllowPrivateTargets), node: store.NewID(),
		clock: clock.Or(d.Clock)}
	s.senders = senders.New("webhook deliveries", d.Logger, opts.Workers, time.Second, s.RunDue)
	return s
}

// filter keeps the subscriptions (alias w) the scope may see: partner-wide ones only for
// callers reaching the whole partner (they receive every organization's events), and those
// of organizations in reach.
func filter(scope access.Scope, a *store.Args) string {
	return scope.OrgFilter(a, "w.org_id", "w.partner_id")
}

func (s *Service) get(ctx context.Context, q store.Querier, scope access.Scope, id string) (row, error) {
	var a store.Args
	return store.ByID(ctx, q, "webhook", `SELECT `+webhookColumns+` FROM webhooks w`, "w.id", id, &a, []string{filter(scope, &a)},
		scanWebhook)
}

// Get returns a subscription in scope.
func (s *Service) Get(ctx context.Context, id string) (Webhook, error) {
	r, err := s.get(ctx, s.db, access.ScopeFrom(ctx), id)
	return r.Webhook, err
}

// List lists the subscriptions in scope, newest first.
func (s *Service) List(ctx context.Context, orgID string, page store.Page) ([]Webhook, string, *int, error) {
	var a store.Args
	conds := []string{filter(access.ScopeFrom(ctx), &a)}
	if orgID != "" {
		conds = append(conds, "w.org_id = "+a.Add(orgID))
	}
	rows, next, total, err := store.List(ctx, s.db, store.ListQuery{Columns: webhookColumns, From: " FROM webhooks w", Conds: conds,
		Args: &a, SortKey: "w.id", SortID: "w.id", Desc: true}, page, scanWebhook, func(r row) (string, string) { return r.ID, r.ID })
	out := make([]Webhook, len(rows))
	for i, r := range rows {
		out[i] = r.Webhook
	}
	if err != nil {
		return out, next, total, fmt.Errorf("list webhooks: %w", err)
	}
	return out, next, total, nil
}

// errPartnerWide refuses a partner-wide subscription to a caller that does not reach every
// organization of its partner.
var errPartnerWide = apperr.Forbidden("a partner-wide subscription receives every organization's events; " +
	"callers limited to some organizations create subscriptions of one organization (orgId)")

// mayReceive refuses (403) events whose data the caller may not read itself.
func mayReceive(ctx context.Context, events []string) error {
	if perm := missingPermission(access.PrincipalFrom(ctx), events); perm != "" {
		return apperr.Forbidden("subscribing to these events hands their data to the receiver; it needs " + string(perm))
	}
	return nil
}

// Create adds a subscription and returns it with its signing secret, shown this once.
func (s *Service) Create(ctx context.Context, in NewWebhook) (Webhook, error) {
	scope := access.ScopeFrom(ctx)
	name, err := validName(in.Name)
	if err != nil {
		return Webhook{}, err
	}
	u, err := parseTarget(in.URL)
	if err != nil {
		return Webhook{}, err
	}
	evs, err := validEvents(in.Events)
	if err != nil {
		return Webhook{}, err
	}
	if err := mayReceive(ctx, evs); err != nil {
		return Webhook{}, err
	}
	headers, err := validHeaders(in.Headers)
	if err != nil {
		return Webhook{}, err
	}
	if err := s.checkTarget(ctx, u); err != nil {
		return Webhook{}, err
	}
	enabled := in.Enabled == nil || *in.Enabled
	secret := secrets.Token(SecretPrefix, 32)
	var out Webhook
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, scope, in.OrgID, tenancy.PlaceOptions{Noun: "subscription", PartnerID: in.PartnerID,
			PartnerWide: true, PartnerWideRefused: errPartnerWide})
		if err != nil {
			return err
		}
		partnerID, orgID := at.PartnerID, at.OrgID
		id, now := store.NewID(), s.clock.Now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhooks (id, partner_id, org_id, name, url, events, headers, header_names,
			secret, secret_hint, enabled, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)`,
			id, partnerID, store.NullIfEmpty(orgID), name, u.String(), store.EncodeStrings(evs), s.sealHeaders(headers),
			store.EncodeStrings(headerNames(headers)), s.box.Seal(secret), secret[len(secret)-4:], enabled, now); err != nil {
			return fmt.Errorf("insert webhook: %w", err)
		}
		r, err := s.get(ctx, tx, access.SystemScope(), id)
		if err != nil {
			return err
		}
		out = r.Webhook
		return audit.Record(ctx, tx, audit.Entry{Action: "webhook.create", ResourceType: "webhook", ResourceID: id,
			ResourceName: name, PartnerID: partnerID, OrgID: orgID, Details: auditView(out)})
	})
	out.Secret = secret
	if err != nil {
		return Webhook{}, fmt.Errorf("create webhook: %w", err)
	}
	return out, nil
}

// auditView is what the audit log keeps of a subscription: never the secret or header values.
func auditView(w Webhook) map[string]any {
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range w.Headers {
			if !yield(k) {
				return
			}
		}
	})
	return map[string]any{"name": w.Name, "url": w.URL, "events": w.Events, "enabled": w.Enabled, "headers": names}
}

func headerNames(h map[string]string) []string {
	out := make([]string, 0, len(h))
	for k := range h {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (s *Service) sealHeaders(h map[string]string) string {
	b, _ := json.Marshal(h)
	return s.box.Seal(string(b))
}

func (s *Service) openHeaders(sealed string) (map[string]string, error) {
	raw, err := s.box.Open(sealed)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	return out, json.Unmarshal([]byte(raw), &out)
}

// Update changes a subscription in scope.
func (s *Service) Update(ctx context.Context, id string, in WebhookUpdate) (Webhook, error) {
	scope := access.ScopeFrom(ctx)
	ch := store.NewChanges(s.clock.Now())
	if in.Name != nil {
		name, err := validName(*in.Name)
		if err != nil {
			return Webhook{}, err
		}
		ch.Set("name", name)
	}
	if in.URL != nil {
		u, err := parseTarget(*in.URL)
		if err != nil {
			return Webhook{}, err
		}
		if err := s.checkTarget(ctx, u); err != nil {
			return Webhook{}, err
		}
		ch.Set("url", u.String())
	}
	if in.Events != nil {
		evs, err := validEvents(in.Events)
		if err != nil {
			return Webhook{}, err
		}
		if err := mayReceive(ctx, evs); err != nil {
			return Webhook{}, err
		}
		ch.Set("events", store.EncodeStrings(evs))
	}
	if in.Headers != nil {
		h, err := validHeaders(in.Headers)
		if err != nil {
			return Webhook{}, err
		}
		ch.Set("headers", s.sealHeaders(h))
		ch.Set("header_names", store.EncodeStrings(headerNames(h)))
	}
	if in.Enabled != nil {
		ch.Set("enabled", *in.Enabled)
	}
	var out Webhook
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.get(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE webhooks SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(id), ch.Args.Values()...); err != nil {
			return fmt.Errorf("update webhook %s: %w", id, err)
		}
		after, err := s.get(ctx, tx, access.SystemScope(), id)
		if err != nil {
			return err
		}
		out = after.Webhook
		return audit.Record(ctx, tx, audit.Entry{Action: "webhook.update", ResourceType: "webhook", ResourceID: id,
			ResourceName: out.Name, PartnerID: out.PartnerID, OrgID: store.Deref(out.OrgID),
			Details: audit.Diff(auditView(before.Webhook), auditView(out))})
	})
	if err != nil {
		return out, fmt.Errorf("update webhook: %w", err)
	}
	return out, nil
}

// RotateSecret replaces the signing secret and returns the subscription with the new one,
// shown this once. Deliveries from now on are signed with it.
func (s *Service) RotateSecret(ctx context.Context, id string) (Webhook, error) {
	scope := access.ScopeFrom(ctx)
	secret := secrets.Token(SecretPrefix, 32)
	var out Webhook
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		if _, err := s.get(ctx, tx, scope, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE webhooks SET secret = $1, secret_hint = $2, updated_at = $3 WHERE id = $4`,
			s.box.Seal(secret), secret[len(secret)-4:], s.clock.Now(), id); err != nil {
			return fmt.Errorf("rotate the secret of webhook %s: %w", id, err)
		}
		r, err := s.get(ctx, tx, access.SystemScope(), id)
		if err != nil {
			return err
		}
		out = r.Webhook
		return audit.Record(ctx, tx, audit.Entry{Action: "webhook.rotate_secret", ResourceType: "webhook", ResourceID: id,
			ResourceName: out.Name, PartnerID: out.PartnerID, OrgID: store.Deref(out.OrgID)})
	})
	if err != nil {
		return Webhook{}, fmt.Errorf("rotate webhook secret: %w", err)
	}
	out.Secret = secret
	return out, nil
}

// Delete removes a subscription in scope with its delivery log.
func (s *Service) Delete(ctx context.Context, id string) error {
	scope := access.ScopeFrom(ctx)
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		r, err := s.get(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM webhook_delivery_attempts WHERE delivery_id IN
			(SELECT id FROM webhook_deliveries WHERE webhook_id = $1)`, id); err != nil {
			return fmt.Errorf("delete the delivery attempts of webhook %s: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE webhook_id = $1`, id); err != nil {
			return fmt.Errorf("delete the deliveries of webhook %s: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM webhooks WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete webhook %s: %w", id, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "webhook.delete", ResourceType: "webhook", ResourceID: id,
			ResourceName: r.Name, PartnerID: r.PartnerID, OrgID: store.Deref(r.OrgID), Details: auditView(r.Webhook)})
	})
}
