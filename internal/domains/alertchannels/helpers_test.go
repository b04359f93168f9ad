package alertchannels_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"gale/internal/app"
	"gale/internal/domains/alertchannels"

	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const api = "/api/v1"

type env struct {
	*apptest.Env
	admin apptest.Caller
	ten   apptest.Tenant
}

func newEnv(t *testing.T, opts ...apptest.Option) *env {
	t.Helper()
	e := apptest.New(t, opts...)
	admin := e.Admin()
	return &env{Env: e, admin: admin, ten: e.NewTenant(admin, "Alpha")}
}

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

func (x *env) beat(dev agentproto.EnrollResponse, cpu float64) {
	x.T.Helper()
	x.Must(200, apptest.Caller{Token: dev.AuthToken}, "POST", api+"/agents/"+dev.DeviceID+"/heartbeat",
		agentproto.Heartbeat{AgentVersion: "1.0.0", Metrics: &agentproto.Metrics{CPUPercent: cpu, RAMPercent: 40, DiskPercent: 10}})
}

// cpuRule creates a CPU rule (gt value) and returns its ID.
func (x *env) cpuRule(c apptest.Caller, value float64, extra map[string]any) string {
	x.T.Helper()
	b := map[string]any{"name": "cpu", "severity": "high", "titleTemplate": "CPU high",
		"conditions": map[string]any{"type": "threshold", "metric": "cpuPercent", "operator": "gt", "value": value}}
	for k, v := range extra {
		b[k] = v
	}
	var r struct {
		ID string `json:"id"`
	}
	x.Must(201, c, "POST", api+"/alerts/rules", b).JSON(x.T, &r)
	return r.ID
}

func (x *env) channel(c apptest.Caller, body map[string]any) string {
	x.T.Helper()
	var r struct {
		ID string `json:"id"`
	}
	x.Must(201, c, "POST", api+"/alerts/channels", body).JSON(x.T, &r)
	return r.ID
}

// pump consumes pending events and sends due deliveries.
func (x *env) pump() {
	x.T.Helper()
	ctx := context.Background()
	if err := x.App.Events.RunOnce(ctx); err != nil {
		x.T.Fatal(err)
	}
	if _, err := app.Service[*alertchannels.Service](x.App).RunDue(ctx); err != nil {
		x.T.Fatal(err)
	}
}

type delivery struct {
	ID             string  `json:"id"`
	AlertID        *string `json:"alertId"`
	Action         string  `json:"action"`
	Step           int     `json:"step"`
	Status         string  `json:"status"`
	Attempts       int     `json:"attempts"`
	ResponseStatus *int    `json:"responseStatus"`
	Error          *string `json:"error"`
}

func (x *env) deliveries(c apptest.Caller, channelID string) []delivery {
	x.T.Helper()
	var out struct {
		Data []delivery `json:"data"`
	}
	x.Must(200, c, "GET", api+"/alerts/channels/"+channelID+"/deliveries", nil).JSON(x.T, &out)
	return out.Data
}

type received struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// receiver answers with the given statuses in order (the last repeats) and keeps requests.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	got      []received
	statuses []int
}

func newReceiver(t testing.TB, statuses ...int) *receiver {
	r := &receiver{statuses: statuses}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{Method: req.Method, Path: req.URL.Path, Header: req.Header.Clone(), Body: body})
		status := http.StatusOK
		if len(r.statuses) > 0 {
			status = r.statuses[0]
			if len(r.statuses) > 1 {
				r.statuses = r.statuses[1:]
			}
		}
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return m
}

type httpRequest struct{ h http.Header }

func (r *httpRequest) basicAuth() (string, string, bool) {
	req := &http.Request{Header: r.h}
	return req.BasicAuth()
}
