package incidents

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/tenancy"
	"gale/internal/domains/webhooks"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Connector polling bounds.
const (
	DefaultPollInterval = 300
	MinPollInterval     = 60
	MaxPollInterval     = 86400
)

// IncidentEDRConnector is an organization's connection to an EDR provider, polled for
// findings. Its API key is stored encrypted and never returned.
type IncidentEDRConnector struct {
	ID                  string     `json:"id" format:"uuid"`
	PartnerID           string     `json:"partnerId" format:"uuid"`
	OrgID               string     `json:"orgId" format:"uuid"`
	Name                string     `json:"name"`
	Provider            string     `json:"provider" enum:"edr_a,edr_b"`
	BaseURL             string     `json:"baseUrl"`
	APIKeySet           bool       `json:"apiKeySet" doc:"Always true: the key is stored encrypted and never returned."`
	Enabled             bool       `json:"enabled"`
	PollIntervalSeconds int        `json:"pollIntervalSeconds"`
	NextPollAt          *time.Time `json:"nextPollAt" doc:"When the poller takes it next; null when disabled."`
	LastPolledAt        *time.Time `json:"lastPolledAt"`
	LastSuccessAt       *time.Time `json:"lastSuccessAt"`
	LastError           *string    `json:"lastError" doc:"Why the last poll failed; null after a successful one."`
	ConsecutiveFailures int        `json:"consecutiveFailures" doc:"Failed polls in a row; each doubles the wait before the next (up to an hour)."`
	FindingsSeen        int        `json:"findingsSeen" doc:"Findings the provider has reported (new or changed) over the connector's life."`
	CreatedBy           *string    `json:"createdBy"`
	CreatedAt           time.Time  `json:"createdAt"`
	UpdatedAt           time.Time  `json:"updatedAt"`
}

// IncidentEDRConnectorInput creates a connector.
type IncidentEDRConnectorInput struct {
	OrgID               string `json:"orgId,omitempty" format:"uuid" doc:"Required unless the caller belongs to one organization."`
	Name                string `json:"name" minLength:"1" maxLength:"200"`
	Provider            string `json:"provider" enum:"edr_a,edr_b"`
	BaseURL             string `json:"baseUrl" minLength:"1" maxLength:"2048" doc:"The provider's API root (http or https)."`
	APIKey              string `json:"apiKey" minLength:"1" maxLength:"4096" doc:"edr_a: the bearer token; edr_b: the X-Api-Key value. Write-only."`
	Enabled             *bool  `json:"enabled,omitempty" doc:"Default true."`
	PollIntervalSeconds *int   `json:"pollIntervalSeconds,omitempty" doc:"60 to 86400; default 300."`
}

// IncidentEDRConnectorUpdate changes a connector (PATCH): the fields sent. The provider
// cannot change; a new baseUrl starts reading the provider from the beginning.
type IncidentEDRConnectorUpdate struct {
	Name                *string `json:"name,omitempty" minLength:"1" maxLength:"200"`
	BaseURL             *string `json:"baseUrl,omitempty" minLength:"1" maxLength:"2048"`
	APIKey              *string `json:"apiKey,omitempty" minLength:"1" maxLength:"4096"`
	Enabled             *bool   `json:"enabled,omitempty"`
	PollIntervalSeconds *int    `json:"pollIntervalSeconds,omitempty" doc:"60 to 86400."`
}

const connectorColumns = `c.id, c.partner_id, c.org_id, c.name, c.provider, c.base_url, c.enabled, c.poll_interval_seconds, c.next_poll_at,
	c.last_polled_at, c.last_success_at, c.last_error, c.consecutive_failures, c.findings_seen, c.created_by, c.created_at, c.updated_at`

func scanConnector(r store.Scanner) (IncidentEDRConnector, error) {
	var c IncidentEDRConnector
	var next time.Time
	var polled, success sql.NullTime
	var lastErr, by sql.NullString
	if err := r.Scan(&c.ID, &c.PartnerID, &c.OrgID, &c.Name, &c.Provider, &c.BaseURL, &c.Enabled, &c.PollIntervalSeconds, &next, &polled,
		&success, &lastErr, &c.ConsecutiveFailures, &c.FindingsSeen, &by, &c.CreatedAt, &c.UpdatedAt); err != nil {
		return c, err
	}
	c.APIKeySet = true
	if c.Enabled {
		next = next.UTC()
		c.NextPollAt = &next
	}
	c.LastPolledAt, c.LastSuccessAt, c.LastError, c.CreatedBy = store.TimePtr(polled), store.TimePtr(success), store.StringPtr(lastErr),
		store.StringPtr(by)
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	return c, nil
}

func connectorFilter(scope access.Scope, a *store.Args) []string {
	return []string{scope.OrgFilter(a, "c.org_id", "c.partner_id"), tenancy.LiveOrg("c.org_id")}
}

func getConnector(ctx context.Context, q store.Querier, scope access.Scope, id string) (IncidentEDRConnector, error) {
	var a store.Args
	return store.ByID(ctx, q, "EDR connector", `SELECT `+connectorColumns+` FROM incident_edr_connectors c`, "c.id", id, &a, connectorFilter(scope, &a), scanConnector)
}

// GetConnector returns a connector in scope.
func (s *Service) GetConnector(ctx context.Context, id string) (IncidentEDRConnector, error) {
	return getConnector(ctx, s.db, access.ScopeFrom(ctx), id)
}

// ListConnectors lists the connectors in scope (of one organization when orgID is set),
// newest first.
func (s *Service) ListConnectors(ctx context.Context, orgID string, page store.Page) ([]IncidentEDRConnector, string, *int, error) {
	var a store.Args
	conds := connectorFilter(access.ScopeFrom(ctx), &a)
	if orgID != "" {
		conds = append(conds, "c.org_id = "+a.Add(orgID))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: connectorColumns, From: " FROM incident_edr_connectors c", Conds: conds, Args: &a,
		SortKey: "c.id", SortID: "c.id", Desc: true}, page, scanConnector,
		func(c IncidentEDRConnector) (string, string) { return c.ID, c.ID })
}

// checkBaseURL validates a provider API root: http or https, with a host that is not private
// unless the operator allows it.
func (s *Service) checkBaseURL(ctx context.Context, raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", apperr.Invalid("baseUrl", "baseUrl must be an http or https URL without credentials")
	}
	if err := webhooks.CheckTarget(ctx, "baseUrl", u, s.allowPrivate); err != nil {
		return "", err
	}
	return strings.TrimRight(u.String(), "/"), nil
}

func checkInterval(v int) error {
	if v < MinPollInterval || v > MaxPollInterval {
		return apperr.Invalid("pollIntervalSeconds", fmt.Sprintf("pollIntervalSeconds must be %d to %d", MinPollInterval, MaxPollInterval))
	}
	return nil
}

// CreateConnector adds a connector; an enabled one is polled at the poller's next round.
func (s *Service) CreateConnector(ctx context.Context, in IncidentEDRConnectorInput) (IncidentEDRConnector, error) {
	if in.Provider != ProviderA && in.Provider != ProviderB {
		return IncidentEDRConnector{}, apperr.Invalid("provider", "provider is edr_a or edr_b")
	}
	if strings.TrimSpace(in.Name) == "" {
		return IncidentEDRConnector{}, apperr.Invalid("name", "name is required")
	}
	if in.APIKey == "" {
		return IncidentEDRConnector{}, apperr.Invalid("apiKey", "apiKey is required")
	}
	interval := DefaultPollInterval
	if in.PollIntervalSeconds != nil {
		interval = *in.PollIntervalSeconds
	}
	if err := checkInterval(interval); err != nil {
		return IncidentEDRConnector{}, err
	}
	base, err := s.checkBaseURL(ctx, in.BaseURL)
	if err != nil {
		return IncidentEDRConnector{}, err
	}
	enabled := in.Enabled == nil || *in.Enabled
	var out IncidentEDRConnector
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, access.ScopeFrom(ctx), in.OrgID, tenancy.PlaceOptions{Noun: "EDR connector"})
		if err != nil {
			return err
		}
		id, now := store.NewID(), s.now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO incident_edr_connectors (id, partner_id, org_id, name, provider, base_url, api_key, enabled,
			poll_interval_seconds, next_poll_at, created_by, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $10, $10)`,
			id, at.PartnerID, at.OrgID, in.Name, in.Provider, base, s.box.Seal(in.APIKey), enabled, interval, now, access.ActorName(ctx)); err != nil {
			return fmt.Errorf("insert EDR connector: %w", err)
		}
		if out, err = getConnector(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "incident_edr_connector.create", ResourceType: "incident_edr_connector", ResourceID: id,
			ResourceName: out.Name, PartnerID: out.PartnerID, OrgID: out.OrgID, Details: connectorAudit(out)})
	})
	if err != nil {
		return out, fmt.Errorf("create EDR connector: %w", err)
	}
	return out, nil
}

func connectorAudit(c IncidentEDRConnector) map[string]any {
	return map[string]any{"provider": c.Provider, "baseUrl": c.BaseURL, "enabled": c.Enabled, "pollIntervalSeconds": c.PollIntervalSeconds}
}

// UpdateConnector changes a connector. Enabling it, or a new baseUrl or key, makes it due at
// once and clears its failure count.
func (s *Service) UpdateConnector(ctx context.Context, id string, in IncidentEDRConnectorUpdate) (IncidentEDRConnector, error) {
	var base string
	if in.BaseURL != nil {
		var err error
		if base, err = s.checkBaseURL(ctx, *in.BaseURL); err != nil {
			return IncidentEDRConnector{}, err
		}
	}
	if in.PollIntervalSeconds != nil {
		if err := checkInterval(*in.PollIntervalSeconds); err != nil {
			return IncidentEDRConnector{}, err
		}
	}
	if in.Name != nil && strings.TrimSpace(*in.Name) == "" {
		return IncidentEDRConnector{}, apperr.Invalid("name", "name cannot be empty")
	}
	var out IncidentEDRConnector
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		c, err := getConnector(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		now := s.now()
		ch := store.NewChanges(now)
		due := false
		if in.Name != nil {
			ch.Set("name", *in.Name)
		}
		if in.BaseURL != nil && base != c.BaseURL {
			ch.Set("base_url", base)
			ch.Set("position", "")
			due = true
		}
		if in.APIKey != nil {
			ch.Set("api_key", s.box.Seal(*in.APIKey))
			due = true
		}
		if in.PollIntervalSeconds != nil {
			ch.Set("poll_interval_seconds", *in.PollIntervalSeconds)
		}
		if in.Enabled != nil {
			ch.Set("enabled", *in.Enabled)
			if *in.Enabled && !c.Enabled {
				due = true
			}
		}
		if due {
			ch.Set("next_poll_at", now)
			ch.Set("consecutive_failures", 0)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE incident_edr_connectors SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(id),
			ch.Args.Values()...); err != nil {
			return fmt.Errorf("update EDR connector %s: %w", id, err)
		}
		if out, err = getConnector(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		details := connectorAudit(out)
		details["apiKeyChanged"] = in.APIKey != nil
		return audit.Record(ctx, tx, audit.Entry{Action: "incident_edr_connector.update", ResourceType: "incident_edr_connector", ResourceID: id,
			ResourceName: out.Name, PartnerID: out.PartnerID, OrgID: out.OrgID, Details: details})
	})
	if err != nil {
		return out, fmt.Errorf("update EDR connector: %w", err)
	}
	return out, nil
}

// DeleteConnector removes a connector with its findings that were not promoted; promoted
// ones stay (their incidents name them) without their connector.
func (s *Service) DeleteConnector(ctx context.Context, id string) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		c, err := getConnector(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM incidents WHERE connector_id = $1 AND tracked_incident_id IS NULL`, id); err != nil {
			return fmt.Errorf("delete findings of EDR connector %s: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE incidents SET connector_id = NULL WHERE connector_id = $1`, id); err != nil {
			return fmt.Errorf("detach findings of EDR connector %s: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM incident_edr_connectors WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete EDR connector %s: %w", id, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "incident_edr_connector.delete", ResourceType: "incident_edr_connector", ResourceID: id,
			ResourceName: c.Name, PartnerID: c.PartnerID, OrgID: c.OrgID})
	})
}

// IncidentEDRConnectorTest is the outcome of a connector test.
type IncidentEDRConnectorTest struct {
	OK      bool   `json:"ok"`
	Message string `json:"message" doc:"What the provider answered, or why it could not be reached."`
}

// TestConnector asks the provider for one page of findings with the connector's settings and
// reports whether it answered as expected; nothing is stored.
func (s *Service) TestConnector(ctx context.Context, id string) (IncidentEDRConnectorTest, error) {
	c, err := s.GetConnector(ctx, id)
	if err != nil {
		return IncidentEDRConnectorTest{}, err
	}
	cfg, err := s.connectorConfig(ctx, s.db, c.ID)
	if err != nil {
		return IncidentEDRConnectorTest{}, err
	}
	items, err := s.providerOf(c.Provider).test(ctx, s.client, cfg)
	if err != nil {
		return IncidentEDRConnectorTest{Message: err.Error()}, nil
	}
	return IncidentEDRConnectorTest{OK: true, Message: fmt.Sprintf("the provider answered with %d findings on its first page", items)}, nil
}

// connectorConfig reads what a poll needs, the key decrypted.
func (s *Service) connectorConfig(ctx context.Context, q store.Querier, id string) (pollConfig, error) {
	var cfg pollConfig
	var sealed string
	err := q.QueryRowContext(ctx, `SELECT id, partner_id, org_id, provider, base_url, api_key, position, poll_interval_seconds,
		consecutive_failures FROM incident_edr_connectors WHERE id = $1`, id).Scan(&cfg.id, &cfg.partnerID, &cfg.orgID, &cfg.provider,
		&cfg.baseURL, &sealed, &cfg.position, &cfg.interval, &cfg.failures)
	if err != nil {
		return cfg, fmt.Errorf("load EDR connector %s: %w", id, err)
	}
	if cfg.apiKey, err = s.box.Open(sealed); err != nil {
		return cfg, fmt.Errorf("decrypt the key of EDR connector %s: %w", id, err)
	}
	return cfg, nil
}
