package notifications_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/app"

	"github.com/golang-jwt/jwt/v5"

	"gale/internal/domains/notifications"
	"gale/internal/platform/config"
	"gale/internal/platform/jobs"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

// fakeFCM is a local FCM: the OAuth2 token endpoint and messages:send. Tokens named in
// unregistered get UNREGISTERED; tokens in failing get 500.
type fakeFCM struct {
	t            *testing.T
	srv          *httptest.Server
	pub          *rsa.PublicKey
	mu           sync.Mutex
	grants       int
	sent         []map[string]any
	auth         []string
	unregistered map[string]bool
	failing      map[string]bool
}

func newFakeFCM(t *testing.T, pub *rsa.PublicKey) *fakeFCM {
	f := &fakeFCM{t: t, pub: pub, unregistered: map[string]bool{}, failing: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
			http.Error(w, "bad grant", 400)
			return
		}
		claims := jwt.MapClaims{}
		tok, err := jwt.ParseWithClaims(r.Form.Get("assertion"), claims, func(*jwt.Token) (any, error) { return f.pub, nil },
			jwt.WithValidMethods([]string{"RS256"}))
		if err != nil || claims["iss"] != "push@test.iam.gserviceaccount.com" || claims["scope"] != "https://www.googleapis.com/auth/firebase.messaging" ||
			claims["aud"] != f.srv.URL+"/token" || tok.Header["kid"] != "key-1" {
			http.Error(w, "bad assertion", 401)
			return
		}
		f.mu.Lock()
		f.grants++
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "ya29.test", "expires_in": 3600, "token_type": "Bearer"})
	})
	mux.HandleFunc("POST /v1/projects/gale-test/messages:send", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &body)
		msg, _ := body["message"].(map[string]any)
		token, _ := msg["token"].(string)
		f.mu.Lock()
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.sent = append(f.sent, msg)
		f.mu.Unlock()
		switch {
		case f.unregistered[token]:
			w.WriteHeader(404)
			_, _ = io.WriteString(w, `{"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND",
				"details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}`)
		case f.failing[token]:
			w.WriteHeader(500)
			_, _ = io.WriteString(w, `{"error":{"code":500,"status":"INTERNAL","message":"try later"}}`)
		default:
			_, _ = io.WriteString(w, `{"name":"projects/gale-test/messages/1"}`)
		}
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// serviceAccount writes a service-account JSON for the fake and returns its path and key.
func serviceAccount(t *testing.T, tokenURI string, key *rsa.PrivateKey) string {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	sa := map[string]string{"type": "service_account", "project_id": "gale-test", "private_key_id": "key-1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "push@test.iam.gserviceaccount.com", "token_uri": tokenURI}
	raw, _ := json.Marshal(sa)
	p := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(p, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFCMSender(t *testing.T) {
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	f := newFakeFCM(t, &key.PublicKey)
	creds, _ := os.ReadFile(serviceAccount(t, f.srv.URL+"/token", key))
	s, err := notifications.NewFCM(notifications.FCMConfig{ProjectID: "gale-test", Credentials: creds, Endpoint: f.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if err := s.Push(ctx, notifications.Message{Token: "tok-a", Title: "Alert: disk", Body: "95%",
			Data: map[string]string{"resourceId": "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	if f.grants != 1 {
		t.Fatalf("access token fetched %d times, want once (cached)", f.grants)
	}
	msg := f.sent[0]
	n, _ := msg["notification"].(map[string]any)
	d, _ := msg["data"].(map[string]any)
	if f.auth[0] != "Bearer ya29.test" || msg["token"] != "tok-a" || n["title"] != "Alert: disk" || n["body"] != "95%" || d["resourceId"] != "x" {
		t.Fatalf("request: auth %q message %v", f.auth[0], msg)
	}
	f.unregistered["dead"] = true
	if err := s.Push(ctx, notifications.Message{Token: "dead"}); !errors.Is(err, notifications.ErrInvalidToken) {
		t.Fatalf("UNREGISTERED: %v", err)
	}
	f.failing["busy"] = true
	if err := s.Push(ctx, notifications.Message{Token: "busy"}); err == nil || errors.Is(err, notifications.ErrInvalidToken) {
		t.Fatalf("500: %v", err)
	}
}

func TestAPNsSender(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	p8 := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	type seen struct {
		proto, path, auth, topic, pushType, priority string
		body                                         map[string]any
	}
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		got = append(got, seen{r.Proto, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("apns-topic"),
			r.Header.Get("apns-push-type"), r.Header.Get("apns-priority"), body})
		mu.Unlock()
		switch {
		case strings.HasSuffix(r.URL.Path, "/gone"):
			w.WriteHeader(410)
			_, _ = io.WriteString(w, `{"reason":"Unregistered","timestamp":1700000000000}`)
		case strings.HasSuffix(r.URL.Path, "/bad"):
			w.WriteHeader(400)
			_, _ = io.WriteString(w, `{"reason":"BadDeviceToken"}`)
		case strings.HasSuffix(r.URL.Path, "/busy"):
			w.WriteHeader(503)
			_, _ = io.WriteString(w, `{"reason":"ServiceUnavailable"}`)
		default:
			w.Header().Set("apns-id", "1")
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	s, err := notifications.NewAPNs(notifications.APNsConfig{Key: p8, KeyID: "ABC123", TeamID: "TEAM42", Topic: "com.example.gale",
		Endpoint: srv.URL, Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Push(ctx, notifications.Message{Token: "abcdef", Title: "Alert: CPU", Body: "99%",
		Data: map[string]string{"link": "/alerts/1"}}); err != nil {
		t.Fatal(err)
	}
	g := got[0]
	if g.proto != "HTTP/2.0" || g.path != "/3/device/abcdef" || g.topic != "com.example.gale" || g.pushType != "alert" || g.priority != "10" {
		t.Fatalf("request: %+v", g)
	}
	aps, _ := g.body["aps"].(map[string]any)
	alert, _ := aps["alert"].(map[string]any)
	if alert["title"] != "Alert: CPU" || alert["body"] != "99%" || g.body["link"] != "/alerts/1" {
		t.Fatalf("body: %v", g.body)
	}
	raw, ok := strings.CutPrefix(g.auth, "bearer ")
	claims := jwt.MapClaims{}
	tok, err := jwt.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return &key.PublicKey, nil },
		jwt.WithValidMethods([]string{"ES256"}))
	if !ok || err != nil || tok.Header["kid"] != "ABC123" || claims["iss"] != "TEAM42" || claims["iat"] == nil {
		t.Fatalf("provider token %q: %v %v", g.auth, err, claims)
	}
	for _, dead := range []string{"gone", "bad"} {
		if err := s.Push(ctx, notifications.Message{Token: dead}); !errors.Is(err, notifications.ErrInvalidToken) {
			t.Fatalf("%s: %v", dead, err)
		}
	}
	if err := s.Push(ctx, notifications.Message{Token: "busy"}); err == nil || errors.Is(err, notifications.ErrInvalidToken) {
		t.Fatalf("503: %v", err)
	}
}

// TestPushDelivery runs the whole path on a server configured for FCM: an alert event
// queues a push per registered Android phone of each recipient, the worker sends them,
// retries failures and removes tokens FCM reports UNREGISTERED.
func TestPushDelivery(t *testing.T) {
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	f := newFakeFCM(t, &key.PublicKey)
	saPath := serviceAccount(t, f.srv.URL+"/token", key)
	e := apptest.New(t, func(c *config.Config) {
		c.FCMProjectID, c.FCMCredentialsFile, c.FCMEndpoint = "gale-test", saPath, f.srv.URL
	})
	admin := e.Admin()
	x := &env{Env: e, admin: admin, ten: e.NewTenant(admin, "Alpha")}
	if !app.Service[*notifications.Service](e.App).PushEnabled() {
		t.Fatal("push not enabled")
	}
	reg := func(c apptest.Caller, token, platform string) {
		e.Must(200, c, "POST", api+"/mobile/notifications/register", map[string]any{"token": token, "platform": platform})
	}
	reg(x.ten.Partner, "good", "android")
	reg(x.ten.Partner, "ios-phone", "ios") // no APNs configured: not queued
	reg(x.ten.Org, "dead", "android")
	reg(x.ten.Org, "busy", "android")
	reg(x.ten.Org, "moved", "android")
	f.unregistered["dead"], f.failing["busy"] = true, true

	alertID := x.insertAlert(x.ten.PartnerID, x.ten.OrgID, "Disk C: 95%")
	// Acknowledge makes a notification but rings no phone.
	e.Must(200, admin, "POST", api+"/alerts/"+alertID+"/acknowledge", nil)
	x.dispatch()
	count := func(q string, args ...any) int {
		var n int
		if err := e.App.DB.SQL.QueryRow(q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(`SELECT COUNT(*) FROM push_messages`); n != 0 {
		t.Fatalf("acknowledge queued %d pushes", n)
	}
	// A triggered alert event (as the evaluation records it) queues one push per Android token.
	x.exec(`INSERT INTO events (id, type, partner_id, org_id, resource_type, resource_id, data, occurred_at)
		VALUES ($1, 'alert.triggered', $2, $3, 'alert', $4, $5, $6)`, store.NewID(), x.ten.PartnerID, x.ten.OrgID, alertID,
		`{"id":"`+alertID+`","orgId":"`+x.ten.OrgID+`","severity":"critical","title":"Disk C: 95%","message":"only 5% left"}`, store.Now())
	x.dispatch()
	if n := count(`SELECT COUNT(*) FROM push_messages WHERE status = 'pending'`); n != 4 {
		t.Fatalf("queued %d pushes, want 4 (good, dead, busy, moved)", n)
	}
	// A token that moved to another user after its push was queued is not sent to.
	reg(x.admin, "moved", "android")
	sent, _ := app.Service[*notifications.Service](e.App).SendDue(context.Background())
	if sent != 1 {
		t.Fatalf("sent %d, want 1", sent)
	}
	if count(`SELECT COUNT(*) FROM push_messages WHERE token = 'good' AND status = 'sent'`) != 1 {
		t.Fatal("good push not marked sent")
	}
	if count(`SELECT COUNT(*) FROM push_tokens WHERE token = 'dead'`) != 0 ||
		count(`SELECT COUNT(*) FROM push_messages WHERE token = 'dead' AND status = 'dropped'`) != 1 {
		t.Fatal("UNREGISTERED token not removed")
	}
	if count(`SELECT COUNT(*) FROM push_messages m JOIN notifications n ON n.id = m.notification_id JOIN users u ON u.id = n.user_id
		WHERE m.token = 'moved' AND m.status = 'dropped' AND u.email = 'alpha-org@gale.test'`) != 1 {
		t.Fatal("push to a token that moved to another user not dropped")
	}
	if count(`SELECT COUNT(*) FROM push_messages WHERE token = 'busy' AND status = 'pending' AND attempts = 1 AND last_error IS NOT NULL`) != 1 {
		t.Fatal("failed push not left for a retry")
	}
	var msg map[string]any
	for _, m := range f.sent {
		if m["token"] == "good" {
			msg = m
		}
	}
	n, _ := msg["notification"].(map[string]any)
	d, _ := msg["data"].(map[string]any)
	if n["title"] != "Alert: Disk C: 95%" || n["body"] != "only 5% left" || d["resourceId"] != alertID || d["type"] != "alert.triggered" {
		t.Fatalf("pushed message: %v", msg)
	}
	// Not due yet: nothing is sent again.
	if sent, _ := app.Service[*notifications.Service](e.App).SendDue(context.Background()); sent != 0 || len(f.sent) != 3 {
		t.Fatalf("resent before the backoff: %d, %d requests", sent, len(f.sent))
	}
	// Retries until the attempts run out, then failed.
	for i := 0; i < 6; i++ {
		x.exec(`UPDATE push_messages SET next_attempt_at = $1 WHERE token = 'busy'`, store.Now().Add(-time.Hour))
		_, _ = app.Service[*notifications.Service](e.App).SendDue(context.Background())
	}
	if count(`SELECT COUNT(*) FROM push_messages WHERE token = 'busy' AND status = 'failed' AND attempts = 5`) != 1 {
		t.Fatal("push not failed after 5 attempts")
	}
}

// TestRunningServerPushesOnItsOwn: with jobs started, a new alert reaches the phone without
// anyone calling the sender.
func TestRunningServerPushesOnItsOwn(t *testing.T) {
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	f := newFakeFCM(t, &key.PublicKey)
	saPath := serviceAccount(t, f.srv.URL+"/token", key)
	e := apptest.New(t, func(c *config.Config) {
		c.FCMProjectID, c.FCMCredentialsFile, c.FCMEndpoint = "gale-test", saPath, f.srv.URL
	})
	admin := e.Admin()
	x := &env{Env: e, admin: admin, ten: e.NewTenant(admin, "Alpha")}
	e.Must(200, x.ten.Org, "POST", api+"/mobile/notifications/register", map[string]any{"token": "phone", "platform": "android"})
	if err := e.App.StartJobs(context.Background(), jobs.Options{}); err != nil {
		t.Fatal(err)
	}
	alertID := x.insertAlert(x.ten.PartnerID, x.ten.OrgID, "Server down")
	x.exec(`INSERT INTO events (id, type, partner_id, org_id, resource_type, resource_id, data, occurred_at)
		VALUES ($1, 'alert.triggered', $2, $3, 'alert', $4, $5, $6)`, store.NewID(), x.ten.PartnerID, x.ten.OrgID, alertID,
		`{"id":"`+alertID+`","orgId":"`+x.ten.OrgID+`","severity":"critical","title":"Server down","message":""}`, store.Now())
	e.App.Events.Wake()
	apptest.Eventually(t, 10*time.Second, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.sent) == 1
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sent[0]["token"] != "phone" {
		t.Fatalf("sent %v", f.sent[0])
	}
}
