package alerts_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/alerts"

	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const api = "/api/v1"

// env is a server with one tenant and an enrolled device of it.
type env struct {
	*apptest.Env
	admin apptest.Caller
	ten   apptest.Tenant
	dev   agentproto.EnrollResponse
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Alpha")
	x := &env{Env: e, admin: admin, ten: ten}
	x.dev = x.enroll(ten, "web-01")
	return x
}

// enroll enrolls a simulated agent in the tenant's organization.
func (x *env) enroll(ten apptest.Tenant, hostname string) agentproto.EnrollResponse {
	x.T.Helper()
	var k struct {
		Key    string `json:"key"`
		Secret string `json:"enrollmentSecret"`
	}
	x.Must(201, ten.Partner, "POST", api+"/enrollment-keys", map[string]any{"orgId": ten.OrgID, "name": "test", "maxUsage": 1,
		"issueEnrollmentSecret": true}).JSON(x.T, &k)
	var r agentproto.EnrollResponse
	x.Must(201, apptest.Anonymous, "POST", api+"/agents/enroll", agentproto.EnrollRequest{EnrollmentKey: k.Key,
		EnrollmentSecret: k.Secret, Hostname: hostname, OSType: "linux", OSVersion: "12", Architecture: "amd64",
		AgentVersion: "1.0.0"}).JSON(x.T, &r)
	return r
}

// beat sends a heartbeat with the given CPU and disk percentages through the HTTP route.
func (x *env) beat(dev agentproto.EnrollResponse, cpu, disk float64) agentproto.HeartbeatResponse {
	x.T.Helper()
	var out agentproto.HeartbeatResponse
	x.Must(200, apptest.Caller{Token: dev.AuthToken}, "POST", api+"/agents/"+dev.DeviceID+"/heartbeat",
		agentproto.Heartbeat{AgentVersion: "1.0.0", Metrics: &agentproto.Metrics{CPUPercent: cpu, RAMPercent: 40, DiskPercent: disk}}).JSON(x.T, &out)
	return out
}

// rule creates a rule as c and returns its ID.
func (x *env) rule(c apptest.Caller, body map[string]any) string {
	x.T.Helper()
	var r struct {
		ID string `json:"id"`
	}
	x.Must(201, c, "POST", api+"/alerts/rules", body).JSON(x.T, &r)
	return r.ID
}

func cpuRule(name string, value float64, extra map[string]any) map[string]any {
	b := map[string]any{"name": name, "severity": "high", "titleTemplate": "CPU {{value}}% > {{threshold}}% on {{hostname}}",
		"conditions": map[string]any{"type": "threshold", "metric": "cpuPercent", "operator": "gt", "value": value}}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

type alertRow struct {
	ID             string          `json:"id"`
	OrgID          string          `json:"orgId"`
	DeviceID       *string         `json:"deviceId"`
	RuleID         *string         `json:"ruleId"`
	Severity       string          `json:"severity"`
	Status         string          `json:"status"`
	Title          string          `json:"title"`
	Context        json.RawMessage `json:"context"`
	AcknowledgedBy *string         `json:"acknowledgedBy"`
	ResolvedAt     *time.Time      `json:"resolvedAt"`
	ResolvedBy     *string         `json:"resolvedBy"`
	ResolutionNote *string         `json:"resolutionNote"`
	DismissedAt    *time.Time      `json:"dismissedAt"`
	DismissedBy    *string         `json:"dismissedBy"`
}

type alertList struct {
	Data       []alertRow `json:"data"`
	Pagination struct {
		HasMore bool   `json:"hasMore"`
		Cursor  string `json:"cursor"`
	} `json:"pagination"`
}

func (x *env) alerts(c apptest.Caller, query string) []alertRow {
	x.T.Helper()
	var l alertList
	x.Must(200, c, "GET", api+"/alerts"+query, nil).JSON(x.T, &l)
	return l.Data
}

// insertAlert adds an alert in the given status straight into the database.
func (x *env) insertAlert(ten apptest.Tenant, deviceID, status, severity string) string {
	x.T.Helper()
	id, now := store.NewID(), store.Now()
	var resolved, dismissed any
	if status == "resolved" {
		resolved = now
	}
	if status == "dismissed" {
		dismissed = now
	}
	var dev any
	if deviceID != "" {
		dev = deviceID
	}
	if _, err := x.App.DB.SQL.Exec(`INSERT INTO alerts (id, partner_id, org_id, device_id, severity, status, title, message, context,
		triggered_at, resolved_at, dismissed_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, '', '{}', $8, $9, $10, $8)`,
		id, ten.PartnerID, ten.OrgID, dev, severity, status, "test "+status, now, resolved, dismissed); err != nil {
		x.T.Fatalf("insert alert: %v", err)
	}
	return id
}

// events counts the recorded events of a type for an alert.
func (x *env) events(typ, alertID string) int {
	x.T.Helper()
	var n int
	if err := x.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM events WHERE type = $1 AND resource_id = $2`, typ, alertID).Scan(&n); err != nil {
		x.T.Fatalf("count events: %v", err)
	}
	return n
}

// evaluate runs the evaluation of one device in its own transaction.
func (x *env) evaluate(deviceID string) error {
	return x.App.DB.Write(context.Background(), func(tx *sql.Tx) error {
		return app.Service[*alerts.Service](x.App).EvaluateDevice(context.Background(), tx, deviceID)
	})
}

func (x *env) exec(q string, args ...any) {
	x.T.Helper()
	if _, err := x.App.DB.SQL.Exec(q, args...); err != nil {
		x.T.Fatalf("%s: %v", q, err)
	}
}

// apiKey mints an API key of the caller with the given permissions and returns a caller using it.
func (x *env) apiKey(c apptest.Caller, name string, perms ...string) (string, apptest.Caller) {
	x.T.Helper()
	var out struct {
		APIKey struct {
			ID string `json:"id"`
		} `json:"apiKey"`
		Key string `json:"key"`
	}
	x.Must(201, c, "POST", api+"/api-keys", map[string]any{"name": name, "permissions": perms}).JSON(x.T, &out)
	return out.APIKey.ID, apptest.Key(out.Key)
}
