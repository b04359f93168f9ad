package webhooks_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/app"

	"gale/internal/domains/devices"
	"gale/internal/domains/webhooks"
	"gale/internal/platform/access"
	"gale/internal/platform/config"
	"gale/internal/platform/events"
	"gale/internal/platform/jobs"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const hooks = "/api/v1/webhooks"

// refusePrivate restores the production default that apptest relaxes.
func refusePrivate(c *config.Config) { c.WebhookAllowPrivateTargets = false }

// received is one request a receiver got.
type received struct {
	Header http.Header
	Body   []byte
}

// receiver is a local HTTP endpoint that answers with the statuses it is given, in order
// (the last one repeats), and remembers what it got.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	got      []received
	statuses []int
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	r := &receiver{statuses: statuses}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{Header: req.Header.Clone(), Body: body})
		status := http.StatusOK
		if len(r.statuses) > 0 {
			status = r.statuses[0]
			if len(r.statuses) > 1 {
				r.statuses = r.statuses[1:]
			}
		}
		r.mu.Unlock()
		if status >= 300 && status < 400 {
			w.Header().Set("Location", "http://example.invalid/elsewhere")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "answer "+strconv.Itoa(status)+" "+strings.Repeat("x", 2000))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

type world struct {
	e     *apptest.Env
	admin apptest.Caller
	a, b  apptest.Tenant
}

func newWorld(t *testing.T, opts ...apptest.Option) *world {
	w := &world{e: apptest.New(t, opts...)}
	w.admin = w.e.Admin()
	w.a = w.e.NewTenant(w.admin, "Alpha")
	w.b = w.e.NewTenant(w.admin, "Beta")
	return w
}

func (w *world) create(c apptest.Caller, body map[string]any) webhooks.Webhook {
	w.e.T.Helper()
	var out webhooks.Webhook
	w.e.Must(http.StatusCreated, c, "POST", hooks, body).JSON(w.e.T, &out)
	return out
}

// pump hands recorded events to the consumers and sends what is due.
func (w *world) pump() {
	w.e.T.Helper()
	ctx := context.Background()
	if err := w.e.App.Events.RunOnce(ctx); err != nil {
		w.e.T.Fatal(err)
	}
	if _, err := app.Service[*webhooks.Service](w.e.App).RunDue(ctx); err != nil {
		w.e.T.Fatal(err)
	}
}

// record writes an event as a domain would.
func (w *world) record(typ, partnerID, orgID string, data any) string {
	w.e.T.Helper()
	var id string
	err := w.e.App.DB.Write(context.Background(), func(tx *sql.Tx) error {
		ev, err := events.Record(context.Background(), tx, events.Event{Type: typ, PartnerID: partnerID, OrgID: orgID}, data)
		id = ev.ID
		return err
	})
	if err != nil {
		w.e.T.Fatal(err)
	}
	return id
}

func (w *world) deliveries(c apptest.Caller, id string) []webhooks.Delivery {
	w.e.T.Helper()
	var out struct {
		Data []webhooks.Delivery `json:"data"`
	}
	w.e.Must(http.StatusOK, c, "GET", hooks+"/"+id+"/deliveries", nil).JSON(w.e.T, &out)
	return out.Data
}

// makeDue moves every waiting delivery's next attempt to now, as if the backoff had passed.
func (w *world) makeDue() {
	w.e.T.Helper()
	if _, err := w.e.App.DB.ExecContext(context.Background(), `UPDATE webhook_deliveries SET next_attempt_at = $1
		WHERE status = $2`, store.Now(), webhooks.StatusRetrying); err != nil {
		w.e.T.Fatal(err)
	}
}

func TestCRUDAndSecretShownOnce(t *testing.T) {
	w := newWorld(t)
	rcv := newReceiver(t)
	created := w.create(w.a.Partner, map[string]any{"name": "Ops", "url": rcv.URL + "/hook", "events": []string{"device.*", "alert.triggered"},
		"headers": map[string]string{"authorization": "Bearer s3cret"}})
	if !strings.HasPrefix(created.Secret, "whsec_") || len(created.Secret) < 40 {
		t.Fatalf("create secret = %q, want whsec_ and 32 random bytes", created.Secret)
	}
	if created.PartnerID != w.a.PartnerID || created.OrgID != nil || !created.Enabled {
		t.Fatalf("created = %+v, want partner-wide, enabled", created)
	}
	if created.Headers["Authorization"] != "****" {
		t.Fatalf("headers = %v, want the value masked", created.Headers)
	}
	r := w.e.Must(http.StatusOK, w.a.Partner, "GET", hooks+"/"+created.ID, nil)
	if strings.Contains(string(r.Body), created.Secret) || strings.Contains(string(r.Body), "s3cret") {
		t.Fatalf("GET shows the secret or a header value: %s", r.Body)
	}
	var got webhooks.Webhook
	r.JSON(t, &got)
	if got.SecretMasked != "whsec_****"+created.Secret[len(created.Secret)-4:] {
		t.Fatalf("secretMasked = %q", got.SecretMasked)
	}
	var stored string
	if err := w.e.App.DB.QueryRowContext(t.Context(), `SELECT secret FROM webhooks WHERE id = $1`, created.ID).Scan(&stored); err != nil ||
		strings.Contains(stored, created.Secret) {
		t.Fatalf("stored secret %q (%v) is not sealed", stored, err)
	}

	var list struct {
		Data []webhooks.Webhook `json:"data"`
	}
	w.e.Must(http.StatusOK, w.a.Partner, "GET", hooks, nil).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != created.ID || list.Data[0].Secret != "" {
		t.Fatalf("list = %+v", list.Data)
	}

	var patched webhooks.Webhook
	w.e.Must(http.StatusOK, w.a.Partner, "PATCH", hooks+"/"+created.ID, map[string]any{"name": "Ops 2", "enabled": false,
		"events": []string{"*"}}).JSON(t, &patched)
	if patched.Name != "Ops 2" || patched.Enabled || len(patched.Events) != 1 || patched.Events[0] != "*" || patched.URL != created.URL {
		t.Fatalf("patched = %+v", patched)
	}

	var rotated webhooks.Webhook
	w.e.Must(http.StatusOK, w.a.Partner, "POST", hooks+"/"+created.ID+"/rotate-secret", nil).JSON(t, &rotated)
	if rotated.Secret == "" || rotated.Secret == created.Secret {
		t.Fatalf("rotate gave %q", rotated.Secret)
	}

	w.e.Must(http.StatusNoContent, w.a.Partner, "DELETE", hooks+"/"+created.ID, nil)
	w.e.Must(http.StatusNotFound, w.a.Partner, "GET", hooks+"/"+created.ID, nil)
}

func TestValidation(t *testing.T) {
	w := newWorld(t)
	good := func() map[string]any {
		return map[string]any{"name": "x", "url": "https://hooks.example.com/in", "events": []string{"device.offline"}}
	}
	cases := map[string]func(m map[string]any){
		"ftp url":         func(m map[string]any) { m["url"] = "ftp://hooks.example.com/" },
		"relative url":    func(m map[string]any) { m["url"] = "/in" },
		"userinfo in url": func(m map[string]any) { m["url"] = "https://u:p@hooks.example.com/" },
		"no events":       func(m map[string]any) { m["events"] = []string{} },
		"bad pattern":     func(m map[string]any) { m["events"] = []string{"alert*"} },
		"empty name":      func(m map[string]any) { m["name"] = " " },
		"reserved header": func(m map[string]any) { m["headers"] = map[string]string{"X-Gale-Signature": "x"} },
		"header newline":  func(m map[string]any) { m["headers"] = map[string]string{"X-Token": "a\r\nb"} },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			body := good()
			mutate(body)
			if r := w.e.Do(w.a.Partner, "POST", hooks, body); r.Status != http.StatusBadRequest {
				t.Fatalf("create = %d %s, want 400", r.Status, r.Body)
			}
		})
	}
	h := w.create(w.a.Partner, good())
	if r := w.e.Do(w.a.Partner, "PATCH", hooks+"/"+h.ID, map[string]any{"events": []string{"nope*"}}); r.Status != http.StatusBadRequest {
		t.Fatalf("patch bad events = %d", r.Status)
	}
	if r := w.e.Do(w.admin, "POST", hooks, good()); r.Status != http.StatusBadRequest {
		t.Fatalf("system caller without partnerId = %d, want 400", r.Status)
	}
}

func TestTenancy(t *testing.T) {
	w := newWorld(t)
	rcv := newReceiver(t)
	partnerWide := w.create(w.a.Partner, map[string]any{"name": "all", "url": rcv.URL, "events": []string{"*"}})
	orgOwn := w.create(w.a.Org, map[string]any{"name": "mine", "url": rcv.URL, "events": []string{"*"}})
	if orgOwn.OrgID == nil || *orgOwn.OrgID != w.a.OrgID {
		t.Fatalf("an organization caller's subscription = %+v, want its organization", orgOwn)
	}
	w.e.Must(http.StatusOK, w.a.Partner, "POST", hooks+"/"+partnerWide.ID+"/test", nil)
	var d webhooks.Delivery
	w.e.Must(http.StatusOK, w.a.Partner, "POST", hooks+"/"+orgOwn.ID+"/test", nil).JSON(t, &d)

	for _, id := range []string{partnerWide.ID, orgOwn.ID} {
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{"GET", hooks + "/" + id, nil},
			{"PATCH", hooks + "/" + id, map[string]any{"name": "stolen"}},
			{"GET", hooks + "/" + id + "/deliveries", nil},
			{"POST", hooks + "/" + id + "/test", nil},
			{"POST", hooks + "/" + id + "/rotate-secret", nil},
			{"POST", hooks + "/" + id + "/retry/" + d.ID, nil},
			{"DELETE", hooks + "/" + id, nil},
		} {
			if r := w.e.Do(w.b.Partner, c.method, c.path, c.body); r.Status != http.StatusNotFound {
				t.Fatalf("partner B %s %s = %d, want 404", c.method, c.path, r.Status)
			}
		}
	}
	// An organization caller does not see the partner-wide subscription (it gets every
	// organization's events), nor can it put its subscription on another organization.
	if r := w.e.Do(w.a.Org, "GET", hooks+"/"+partnerWide.ID, nil); r.Status != http.StatusNotFound {
		t.Fatalf("org caller GET partner-wide = %d, want 404", r.Status)
	}
	if r := w.e.Do(w.a.Org, "POST", hooks, map[string]any{"name": "x", "url": rcv.URL, "events": []string{"*"},
		"orgId": w.b.OrgID}); r.Status != http.StatusBadRequest {
		t.Fatalf("org caller create for a foreign org = %d, want 400", r.Status)
	}
	var list struct {
		Data []webhooks.Webhook `json:"data"`
	}
	w.e.Must(http.StatusOK, w.b.Partner, "GET", hooks, nil).JSON(t, &list)
	if len(list.Data) != 0 {
		t.Fatalf("partner B lists %d of A's subscriptions", len(list.Data))
	}
	w.e.Must(http.StatusOK, w.a.Org, "GET", hooks, nil).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != orgOwn.ID {
		t.Fatalf("org caller lists %+v, want only its own", list.Data)
	}
}

// verify checks a delivery request as a receiver would: the signature over
// "<timestamp>.<body>" with the secret, and a recent timestamp.
func verify(t *testing.T, secret string, r received) {
	t.Helper()
	ts := r.Header.Get("X-Gale-Timestamp")
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.UnixMilli(ms)).Abs() > time.Minute {
		t.Fatalf("X-Gale-Timestamp = %q, want milliseconds of now", ts)
	}
	if got, want := r.Header.Get("X-Gale-Signature"), webhooks.Sign(secret, ts, r.Body); got != want {
		t.Fatalf("signature %q, want %q", got, want)
	}
}

func TestSignedDeliveryOfADeviceGoingOffline(t *testing.T) {
	w := newWorld(t)
	rcv := newReceiver(t)
	h := w.create(w.a.Partner, map[string]any{"name": "ops", "url": rcv.URL + "/in", "events": []string{"device.offline"},
		"headers": map[string]string{"Authorization": "Bearer abc"}})
	dev := w.e.InsertDevice(apptest.DeviceRow{PartnerID: w.a.PartnerID, OrgID: w.a.OrgID, SiteID: w.a.SiteID, Hostname: "srv-01",
		LastSeen: time.Now().Add(-time.Hour)})
	if err := app.Service[*devices.Service](w.e.App).Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	w.pump()
	got := rcv.requests()
	if len(got) != 1 {
		t.Fatalf("receiver got %d requests, want 1", len(got))
	}
	r := got[0]
	verify(t, h.Secret, r)
	// A signature made with another secret does not verify.
	if webhooks.Sign("whsec_other", r.Header.Get("X-Gale-Timestamp"), r.Body) == r.Header.Get("X-Gale-Signature") {
		t.Fatal("a foreign secret verifies too")
	}
	var env struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		Timestamp time.Time       `json:"timestamp"`
		OrgID     string          `json:"orgId"`
		Data      devices.Device  `json:"data"`
		Extra     json.RawMessage `json:"-"`
	}
	if err := json.Unmarshal(r.Body, &env); err != nil {
		t.Fatal(err)
	}
	if env.Type != "device.offline" || env.OrgID != w.a.OrgID || env.Data.ID != dev || env.Data.Status != "offline" ||
		env.Data.Hostname != "srv-01" || env.Timestamp.IsZero() {
		t.Fatalf("envelope = %+v", env)
	}
	ds := w.deliveries(w.a.Partner, h.ID)
	if len(ds) != 1 {
		t.Fatalf("deliveries = %d", len(ds))
	}
	d := ds[0]
	for k, v := range map[string]string{"X-Gale-Delivery": d.ID, "X-Gale-Event": env.ID, "X-Gale-Event-Type": "device.offline",
		"Content-Type": "application/json", "Authorization": "Bearer abc"} {
		if r.Header.Get(k) != v {
			t.Errorf("header %s = %q, want %q", k, r.Header.Get(k), v)
		}
	}
	if d.Status != webhooks.StatusSucceeded || d.Attempts != 1 || d.ResponseStatus == nil || *d.ResponseStatus != 200 ||
		d.DurationMs == nil || d.DeliveredAt == nil || d.EventID != env.ID || len(d.Log) != 1 {
		t.Fatalf("delivery = %+v", d)
	}
	if n := len([]rune(*d.ResponseBody)); n != webhooks.BodyLogChars {
		t.Fatalf("logged body has %d characters, want the first %d", n, webhooks.BodyLogChars)
	}
}

func TestEventFilteringByTypeWildcardAndTenancy(t *testing.T) {
	w := newWorld(t)
	rcv := newReceiver(t)
	orgA2 := w.e.CreateOrg(w.a.Partner, "", "Alpha Second")
	alerts := w.create(w.a.Partner, map[string]any{"name": "alerts", "url": rcv.URL, "events": []string{"alert.*"}})
	offline := w.create(w.a.Partner, map[string]any{"name": "offline", "url": rcv.URL, "events": []string{"device.offline"}})
	orgOnly := w.create(w.a.Partner, map[string]any{"name": "org", "url": rcv.URL, "events": []string{"*"}, "orgId": orgA2})
	foreign := w.create(w.b.Partner, map[string]any{"name": "foreign", "url": rcv.URL, "events": []string{"*"}})
	disabled := w.create(w.a.Partner, map[string]any{"name": "off", "url": rcv.URL, "events": []string{"*"}, "enabled": false})
	if _, err := w.e.App.DB.ExecContext(t.Context(), `DELETE FROM events`); err != nil {
		t.Fatal(err)
	}

	w.record("alert.triggered", w.a.PartnerID, w.a.OrgID, map[string]any{"n": 1})
	w.record("alert.resolved", w.a.PartnerID, orgA2, map[string]any{"n": 2})
	w.record("device.offline", w.a.PartnerID, w.a.OrgID, map[string]any{"n": 3})
	w.record("device.online", w.a.PartnerID, orgA2, map[string]any{"n": 4})
	w.record("alertx.other", w.a.PartnerID, w.a.OrgID, map[string]any{"n": 5})
	w.record("device.offline", "", "", map[string]any{"n": 6})
	w.pump()

	types := func(id string) []string {
		var out []string
		for _, d := range w.deliveries(w.admin, id) {
			out = append([]string{d.EventType}, out...)
		}
		return out
	}
	for _, c := range []struct {
		id   string
		want []string
	}{
		{alerts.ID, []string{"alert.triggered", "alert.resolved"}},
		{offline.ID, []string{"device.offline"}},
		{orgOnly.ID, []string{"alert.resolved", "device.online"}},
		{foreign.ID, nil},
		{disabled.ID, nil},
	} {
		if got := types(c.id); strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("subscription %s got %v, want %v", c.id, got, c.want)
		}
	}
	if n := len(rcv.requests()); n != 5 {
		t.Fatalf("receiver got %d requests, want 5", n)
	}
	// Partner B's events never reach partner A's subscriptions, and do reach B's.
	w.record("device.offline", w.b.PartnerID, w.b.OrgID, nil)
	w.pump()
	if got := types(foreign.ID); len(got) != 1 {
		t.Fatalf("partner B's subscription got %v", got)
	}
	if got := types(offline.ID); len(got) != 1 {
		t.Fatalf("partner A's subscription got %v after a partner B event", got)
	}
}

func TestRetriesWithBackoffThenSuccess(t *testing.T) {
	w := newWorld(t)
	rcv := newReceiver(t, 500, 503, 200)
	h := w.create(w.a.Partner, map[string]any{"name": "r", "url": rcv.URL, "events": []string{"thing.*"}})
	w.record("thing.happened", w.a.PartnerID, w.a.OrgID, map[string]any{"x": 1})
	w.pump()
	for i, wantWait := range []time.Duration{time.Second, 2 * time.Second} {
		d := w.deliveries(w.a.Partner, h.ID)[0]
		if d.Status != webhooks.StatusRetrying || d.Attempts != i+1 || d.NextAttemptAt == nil || d.Error == nil {
			t.Fatalf("after attempt %d: %+v", i+1, d)
		}
		last := d.Log[len(d.Log)-1]
		wait := d.NextAttemptAt.Sub(last.StartedAt)
		if wait < wantWait || wait > wantWait+2*time.Second {
			t.Fatalf("after attempt %d the next one waits %s, want about %s", i+1, wait, wantWait)
		}
		// Not due yet: nothing is sent.
		if n, _ := app.Service[*webhooks.Service](w.e.App).RunDue(t.Context()); n != 0 {
			t.Fatalf("sent %d deliveries before their backoff passed", n)
		}
		w.makeDue()
		w.pump()
	}
	d := w.deliveries(w.a.Partner, h.ID)[0]
	if d.Status != webhooks.StatusSucceeded || d.Attempts != 3 || len(d.Log) != 3 || d.NextAttemptAt != nil {
		t.Fatalf("final delivery = %+v", d)
	}
	for i, want := range []int{500, 503, 200} {
		if d.Log[i].Attempt != i+1 || d.Log[i].ResponseStatus == nil || *d.Log[i].ResponseStatus != want {
			t.Fatalf("log[%d] = %+v, want status %d", i, d.Log[i], want)
		}
	}
	reqs := rcv.requests()
	if len(reqs) != 3 || string(reqs[0].Body) != string(reqs[2].Body) ||
		reqs[0].Header.Get("X-Gale-Delivery") != reqs[2].Header.Get("X-Gale-Delivery") {
		t.Fatal("retries do not resend the same delivery and body")
	}
	for _, r := range reqs {
		verify(t, h.Secret, r)
	}
}

func TestBackoffSchedule(t *testing.T) {
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 4: 8 * time.Second, 9: 256 * time.Second,
		10: 300 * time.Second, 40: 300 * time.Second} {
		if got := webhooks.Backoff(n); got != want {
			t.Errorf("Backoff(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestDeadAfterFiveAttemptsAndManualRetry(t *testing.T) {
	w := newWorld(t)
	rcv := newReceiver(t, 500, 500, 500, 500, 500, 204)
	h := w.create(w.a.Partner, map[string]any{"name": "r", "url": rcv.URL, "events": []string{"thing.*"}})
	w.record("thing.happened", w.a.PartnerID, w.a.OrgID, nil)
	w.pump()
	for range 6 {
		w.makeDue()
		w.pump()
	}
	var d webhooks.Delivery
	for _, x := range w.deliveries(w.a.Partner, h.ID) {
		if x.EventType == "thing.happened" {
			d = x
		}
	}
	if d.Status != webhooks.StatusDead || d.Attempts != 5 || len(d.Log) != 5 || d.NextAttemptAt != nil {
		t.Fatalf("delivery = %+v, want dead after 5 attempts", d)
	}
	if n := len(rcv.requests()); n != 5 {
		t.Fatalf("receiver got %d requests, want 5", n)
	}
	path := hooks + "/" + h.ID + "/retry/" + d.ID
	var re webhooks.Delivery
	w.e.Must(http.StatusOK, w.a.Partner, "POST", path, nil).JSON(t, &re)
	if re.Status != webhooks.StatusPending || re.MaxAttempts != 10 {
		t.Fatalf("retried = %+v", re)
	}
	w.pump()
	d = w.deliveries(w.a.Partner, h.ID)[0]
	if d.ID != re.ID || d.Status != webhooks.StatusSucceeded || d.Attempts != 6 {
		t.Fatalf("after manual retry: %+v", d)
	}
	if r := w.e.Do(w.a.Partner, "POST", path, nil); r.Status != http.StatusConflict {
		t.Fatalf("retry of a succeeded delivery = %d, want 409", r.Status)
	}
	if r := w.e.Do(w.a.Partner, "POST", hooks+"/"+h.ID+"/retry/"+store.NewID(), nil); r.Status != http.StatusNotFound {
		t.Fatalf("retry of an unknown delivery = %d, want 404", r.Status)
	}
}

func TestRedirectIsAFailure(t *testing.T) {
	w := newWorld(t)
	rcv := newReceiver(t, http.StatusFound)
	h := w.create(w.a.Partner, map[string]any{"name": "r", "url": rcv.URL, "events": []string{"*"}})
	var d webhooks.Delivery
	w.e.Must(http.StatusOK, w.a.Partner, "POST", hooks+"/"+h.ID+"/test", nil).JSON(t, &d)
	if d.Status != webhooks.StatusDead || d.ResponseStatus == nil || *d.ResponseStatus != http.StatusFound || d.Error == nil ||
		!strings.Contains(*d.Error, "redirect") {
		t.Fatalf("delivery answered by a redirect = %+v", d)
	}
	if n := len(rcv.requests()); n != 1 {
		t.Fatalf("receiver got %d requests, want 1 (the redirect is not followed)", n)
	}
}

func TestTestRouteSendsSynchronously(t *testing.T) {
	w := newWorld(t)
	rcv := newReceiver(t)
	h := w.create(w.a.Org, map[string]any{"name": "t", "url": rcv.URL, "events": []string{"device.offline"}, "enabled": false})
	var d webhooks.Delivery
	w.e.Must(http.StatusOK, w.a.Org, "POST", hooks+"/"+h.ID+"/test", nil).JSON(t, &d)
	if d.Status != webhooks.StatusSucceeded || d.EventType != webhooks.TestEventType || d.Attempts != 1 {
		t.Fatalf("test delivery = %+v", d)
	}
	reqs := rcv.requests()
	if len(reqs) != 1 || reqs[0].Header.Get("X-Gale-Event-Type") != "webhook.test" {
		t.Fatalf("receiver got %+v", reqs)
	}
	verify(t, h.Secret, reqs[0])
	var env struct {
		Type  string `json:"type"`
		OrgID string `json:"orgId"`
	}
	_ = json.Unmarshal(reqs[0].Body, &env)
	if env.Type != "webhook.test" || env.OrgID != w.a.OrgID {
		t.Fatalf("test envelope = %s", reqs[0].Body)
	}
	if ds := w.deliveries(w.a.Org, h.ID); len(ds) != 1 || ds[0].ID != d.ID {
		t.Fatalf("log = %+v", ds)
	}
}

func TestPrivateTargetsRefusedUnlessAllowed(t *testing.T) {
	w := newWorld(t, refusePrivate)
	for _, u := range []string{"http://127.0.0.1:8080/in", "https://10.1.2.3/in", "http://[::1]/in", "http://192.168.0.10/",
		"http://169.254.169.254/latest/meta-data", "http://[fd00::1]/", "http://0.0.0.0/", "http://[::ffff:127.0.0.1]/",
		"http://localhost/"} {
		r := w.e.Do(w.a.Partner, "POST", hooks, map[string]any{"name": "x", "url": u, "events": []string{"*"}})
		if r.Status != http.StatusBadRequest {
			t.Errorf("create with %s = %d %s, want 400", u, r.Status, r.Body)
		}
	}
	h := w.create(w.a.Partner, map[string]any{"name": "x", "url": "https://93.184.215.14/in", "events": []string{"*"}})
	if r := w.e.Do(w.a.Partner, "PATCH", hooks+"/"+h.ID, map[string]any{"url": "http://10.0.0.1/"}); r.Status != http.StatusBadRequest {
		t.Fatalf("patch to a private target = %d, want 400", r.Status)
	}
	// A name that resolved publicly at create time but points at a private address when
	// sending (DNS rebinding) is refused when connecting.
	rcv := newReceiver(t)
	if _, err := w.e.App.DB.ExecContext(t.Context(), `UPDATE webhooks SET url = $1 WHERE id = $2`, rcv.URL, h.ID); err != nil {
		t.Fatal(err)
	}
	var d webhooks.Delivery
	w.e.Must(http.StatusOK, w.a.Partner, "POST", hooks+"/"+h.ID+"/test", nil).JSON(t, &d)
	if d.Status != webhooks.StatusDead || d.ResponseStatus != nil || d.Error == nil || !strings.Contains(*d.Error, "private") {
		t.Fatalf("delivery to a private address = %+v", d)
	}
	if n := len(rcv.requests()); n != 0 {
		t.Fatalf("the private receiver got %d requests", n)
	}
}

// eventsOf lists the recorded events of a type about a resource.
func eventsOf(t *testing.T, db *store.DB, typ, resourceID string) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT data FROM events WHERE type = $1 AND resource_id = $2 ORDER BY occurred_at`, typ, resourceID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func TestDeviceEventsOnTransitionsOnly(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	dev := w.e.InsertDevice(apptest.DeviceRow{PartnerID: w.a.PartnerID, OrgID: w.a.OrgID, SiteID: w.a.SiteID, Hostname: "d1",
		LastSeen: time.Now().Add(-time.Hour)})
	svc := app.Service[*devices.Service](w.e.App)
	for range 2 {
		if err := svc.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	off := eventsOf(t, w.e.App.DB, "device.offline", dev)
	if len(off) != 1 {
		t.Fatalf("device.offline recorded %d times over two sweeps, want once", len(off))
	}
	var data devices.Device
	if err := json.Unmarshal([]byte(off[0]), &data); err != nil || data.ID != dev || data.Status != "offline" || data.OrgID != w.a.OrgID {
		t.Fatalf("device.offline data = %s (%v)", off[0], err)
	}
	// The data is the device as the API shows it.
	var shown devices.Device
	w.e.Must(http.StatusOK, w.a.Partner, "GET", "/api/v1/devices/"+dev, nil).JSON(t, &shown)
	a, _ := json.Marshal(shown)
	b, _ := json.Marshal(data)
	if string(a) != string(b) {
		t.Fatalf("device.offline data\n%s\ndiffers from GET /devices/{id}\n%s", b, a)
	}
	agent := devices.Agent{DeviceID: dev, PartnerID: w.a.PartnerID, OrgID: w.a.OrgID, Role: agentproto.RoleAgent}
	for range 2 {
		if _, err := svc.Heartbeat(ctx, agent, agentproto.Heartbeat{AgentVersion: "1.0.0"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(eventsOf(t, w.e.App.DB, "device.online", dev)); n != 1 {
		t.Fatalf("device.online recorded %d times over two heartbeats, want once", n)
	}
	// The main agent goes quiet while the watchdog keeps reporting.
	if _, err := w.e.App.DB.ExecContext(ctx, `UPDATE devices SET last_seen_at = $1 WHERE id = $2`, time.Now().Add(-time.Hour).UTC(), dev); err != nil {
		t.Fatal(err)
	}
	wd := agent
	wd.Role = agentproto.RoleWatchdog
	for range 2 {
		if _, err := svc.Heartbeat(ctx, wd, agentproto.Heartbeat{WatchdogState: "connected"}); err != nil {
			t.Fatal(err)
		}
	}
	silent := eventsOf(t, w.e.App.DB, "device.main_agent_silent", dev)
	if len(silent) != 1 {
		t.Fatalf("device.main_agent_silent recorded %d times, want once", len(silent))
	}
	if err := json.Unmarshal([]byte(silent[0]), &data); err != nil || data.MainAgentSilentSince == nil {
		t.Fatalf("main_agent_silent data = %s", silent[0])
	}
	w.e.Must(http.StatusNoContent, w.a.Partner, "DELETE", "/api/v1/devices/"+dev, nil)
	dec := eventsOf(t, w.e.App.DB, "device.decommissioned", dev)
	if len(dec) != 1 || !strings.Contains(dec[0], `"status":"decommissioned"`) {
		t.Fatalf("device.decommissioned = %v", dec)
	}
}

func TestAuditEntriesAreEventsAndDelivered(t *testing.T) {
	w := newWorld(t)
	rcv := newReceiver(t)
	h := w.create(w.a.Partner, map[string]any{"name": "audit", "url": rcv.URL, "events": []string{"audit.*"}})
	var n int
	if err := w.e.App.DB.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM events WHERE type = 'audit.webhook.create' AND partner_id = $1`,
		w.a.PartnerID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("audit.webhook.create events = %d (%v), want 1", n, err)
	}
	w.e.Must(http.StatusOK, w.a.Partner, "PATCH", hooks+"/"+h.ID, map[string]any{"name": "audit 2"})
	w.pump()
	var got []string
	for _, r := range rcv.requests() {
		var env struct {
			Type string `json:"type"`
			Data struct {
				Action     string `json:"action"`
				ResourceID string `json:"resourceId"`
				ActorType  string `json:"actorType"`
			} `json:"data"`
		}
		if err := json.Unmarshal(r.Body, &env); err != nil {
			t.Fatal(err)
		}
		if env.Data.ResourceID == h.ID {
			got = append(got, env.Type+"/"+env.Data.Action+"/"+env.Data.ActorType)
		}
	}
	if strings.Join(got, ",") != "audit.webhook.create/webhook.create/user,audit.webhook.update/webhook.update/user" {
		t.Fatalf("audit deliveries = %v", got)
	}
}

func TestTwoNodesSendEachDeliveryOnce(t *testing.T) {
	w := newWorld(t)
	second := w.e.SecondNode()
	rcv := newReceiver(t)
	w.create(w.a.Partner, map[string]any{"name": "n", "url": rcv.URL, "events": []string{"thing.*"}})
	for i := range 20 {
		w.record("thing.happened", w.a.PartnerID, w.a.OrgID, map[string]int{"i": i})
	}
	if err := w.e.App.Events.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, svc := range []*webhooks.Service{app.Service[*webhooks.Service](w.e.App), app.Service[*webhooks.Service](second.App), app.Service[*webhooks.Service](w.e.App), app.Service[*webhooks.Service](second.App)} {
		wg.Go(func() {
			if _, err := svc.RunDue(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	seen := map[string]int{}
	for _, r := range rcv.requests() {
		seen[r.Header.Get("X-Gale-Delivery")]++
	}
	if len(seen) != 20 {
		t.Fatalf("receiver got %d distinct deliveries, want 20", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("delivery %s sent %d times", id, n)
		}
	}
}

func TestDisabledSubscriptionGetsNothing(t *testing.T) {
	w := newWorld(t)
	rcv := newReceiver(t)
	h := w.create(w.a.Partner, map[string]any{"name": "d", "url": rcv.URL, "events": []string{"thing.*"}})
	w.record("thing.happened", w.a.PartnerID, w.a.OrgID, nil)
	if err := w.e.App.Events.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Disabled after the delivery was queued: it is not sent, and is dead at once.
	w.e.Must(http.StatusOK, w.a.Partner, "PATCH", hooks+"/"+h.ID, map[string]any{"enabled": false})
	w.pump()
	ds := w.deliveries(w.a.Partner, h.ID)
	if len(ds) != 1 || ds[0].Status != webhooks.StatusDead || ds[0].Error == nil || !strings.Contains(*ds[0].Error, "disabled") {
		t.Fatalf("deliveries = %+v", ds)
	}
	w.record("thing.happened", w.a.PartnerID, w.a.OrgID, nil)
	w.pump()
	if n := len(w.deliveries(w.a.Partner, h.ID)); n != 1 {
		t.Fatalf("a disabled subscription got %d deliveries, want none new", n)
	}
	if n := len(rcv.requests()); n != 0 {
		t.Fatalf("receiver got %d requests", n)
	}
}

func TestPermissionsAndOrgLimitedPartnerCallers(t *testing.T) {
	w := newWorld(t)
	rcv := newReceiver(t)
	body := map[string]any{"name": "p", "url": rcv.URL, "events": []string{"*"}}
	partnerWide := w.create(w.a.Partner, body)

	_, viewer := w.e.CreateUser("viewer@alpha.test", access.LevelPartner, w.a.PartnerID, "", access.RolePartnerViewer)
	w.e.Must(http.StatusOK, viewer, "GET", hooks+"/"+partnerWide.ID, nil)
	w.e.Must(http.StatusForbidden, viewer, "POST", hooks, body)
	w.e.Must(http.StatusForbidden, viewer, "POST", hooks+"/"+partnerWide.ID+"/test", nil)
	_, tech := w.e.CreateUser("tech@alpha.test", access.LevelPartner, w.a.PartnerID, "", access.RolePartnerTechnician)
	w.e.Must(http.StatusForbidden, tech, "GET", hooks, nil)
	_, orgViewer := w.e.CreateUser("orgviewer@alpha.test", access.LevelOrganization, w.a.PartnerID, w.a.OrgID, access.RoleOrgViewer)
	w.e.Must(http.StatusForbidden, orgViewer, "POST", hooks, body)

	// A partner admin limited to one organization manages that organization's subscriptions
	// only: a partner-wide one would hand it every organization's events.
	other := w.e.CreateOrg(w.a.Partner, "", "Alpha Other")
	lid, _ := w.e.CreateUser("limited@alpha.test", access.LevelPartner, w.a.PartnerID, "", access.RolePartnerAdmin)
	w.e.Must(http.StatusOK, w.a.Partner, "PATCH", "/api/v1/users/"+lid, map[string]any{"orgAccess": "selected", "orgIds": []string{w.a.OrgID}})
	limited := apptest.Bearer(w.e.Login("limited@alpha.test", apptest.UserPassword))
	w.e.Must(http.StatusForbidden, limited, "POST", hooks, body)
	w.e.Must(http.StatusNotFound, limited, "GET", hooks+"/"+partnerWide.ID, nil)
	withOrg := map[string]any{"name": "o", "url": rcv.URL, "events": []string{"*"}, "orgId": other}
	w.e.Must(http.StatusBadRequest, limited, "POST", hooks, withOrg)
	withOrg["orgId"] = w.a.OrgID
	mine := w.create(limited, withOrg)
	if mine.OrgID == nil || *mine.OrgID != w.a.OrgID {
		t.Fatalf("limited caller's subscription = %+v", mine)
	}
}

func TestAuditEventDataIsTheEntryAsTheAPIShowsIt(t *testing.T) {
	w := newWorld(t)
	// A refused sign-in is a security entry written in its own transaction; it records its
	// event too.
	w.e.Do(apptest.Anonymous, "POST", "/api/v1/auth/login", map[string]string{"email": "alpha-partner@gale.test", "password": "wrong"})
	var id, data string
	if err := w.e.App.DB.QueryRowContext(t.Context(), `SELECT resource_id, data FROM events WHERE type = 'audit.auth.login'
		ORDER BY occurred_at DESC LIMIT 1`).Scan(&id, &data); err != nil {
		t.Fatal(err)
	}
	var fromEvent, fromAPI map[string]any
	_ = json.Unmarshal([]byte(data), &fromEvent)
	w.e.Must(http.StatusOK, w.admin, "GET", "/api/v1/audit/logs/"+id, nil).JSON(t, &fromAPI)
	a, _ := json.Marshal(fromEvent)
	b, _ := json.Marshal(fromAPI)
	if string(a) != string(b) || fromEvent["result"] == "success" {
		t.Fatalf("audit.auth.login data\n%s\ndiffers from GET /audit/logs/{id}\n%s", a, b)
	}
}

func TestRunningServerDeliversOnItsOwn(t *testing.T) {
	w := newWorld(t)
	rcv := newReceiver(t)
	w.create(w.a.Partner, map[string]any{"name": "live", "url": rcv.URL, "events": []string{"device.decommissioned"}})
	dev := w.e.InsertDevice(apptest.DeviceRow{PartnerID: w.a.PartnerID, OrgID: w.a.OrgID, SiteID: w.a.SiteID, Hostname: "gone"})
	if err := w.e.App.StartJobs(context.Background(), jobs.Options{}); err != nil {
		t.Fatal(err)
	}
	w.e.Must(http.StatusNoContent, w.a.Partner, "DELETE", "/api/v1/devices/"+dev, nil)
	apptest.Eventually(t, 15*time.Second, func() bool { return len(rcv.requests()) > 0 })
	r := rcv.requests()[0]
	if r.Header.Get("X-Gale-Event-Type") != "device.decommissioned" || !strings.Contains(string(r.Body), dev) {
		t.Fatalf("got %s %s", r.Header.Get("X-Gale-Event-Type"), r.Body)
	}
}

func TestPurgeKeepsRecentAndUnfinishedDeliveries(t *testing.T) {
	w := newWorld(t)
	rcv := newReceiver(t, 200)
	h := w.create(w.a.Partner, map[string]any{"name": "p", "url": rcv.URL, "events": []string{"thing.*"}})
	for range 3 {
		w.record("thing.happened", w.a.PartnerID, w.a.OrgID, nil)
	}
	w.pump()
	ds := w.deliveries(w.a.Partner, h.ID)
	old := time.Now().Add(-webhooks.Retention - time.Hour).UTC()
	// One old finished delivery, one old unfinished (retrying) one, one recent finished one.
	db := w.e.App.DB
	if _, err := db.ExecContext(t.Context(), `UPDATE webhook_deliveries SET updated_at = $1 WHERE id = $2`, old, ds[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `UPDATE webhook_deliveries SET updated_at = $1, status = $2 WHERE id = $3`, old,
		webhooks.StatusRetrying, ds[1].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Service[*webhooks.Service](w.e.App).Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, d := range w.deliveries(w.a.Partner, h.ID) {
		left[d.ID] = true
	}
	if left[ds[0].ID] || !left[ds[1].ID] || !left[ds[2].ID] {
		t.Fatalf("after purge %v remain, want all but the old finished one", left)
	}
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM webhook_delivery_attempts WHERE delivery_id = $1`, ds[0].ID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("attempts of the purged delivery: %d (%v)", n, err)
	}
}

func TestSubscribingNeedsReadingWhatIsSent(t *testing.T) {
	w := newWorld(t)
	rcv := newReceiver(t)
	var role struct {
		ID string `json:"id"`
	}
	w.e.Must(http.StatusCreated, w.a.Partner, "POST", "/api/v1/roles", map[string]any{"name": "Hooks", "scope": "partner",
		"permissions": []string{"webhooks:read", "webhooks:write", "devices:read"}}).JSON(t, &role)
	_, c := w.e.CreateUser("hooks@alpha.test", access.LevelPartner, w.a.PartnerID, "", role.ID)
	for _, evs := range [][]string{{"*"}, {"audit.*"}, {"device.offline", "alert.triggered"}} {
		if r := w.e.Do(c, "POST", hooks, map[string]any{"name": "x", "url": rcv.URL, "events": evs}); r.Status != http.StatusForbidden {
			t.Fatalf("events %v without the read permission = %d %s, want 403", evs, r.Status, r.Body)
		}
	}
	h := w.create(c, map[string]any{"name": "x", "url": rcv.URL, "events": []string{"device.*"}})
	if r := w.e.Do(c, "PATCH", hooks+"/"+h.ID, map[string]any{"events": []string{"audit.auth.login"}}); r.Status != http.StatusForbidden {
		t.Fatalf("patch to audit events = %d, want 403", r.Status)
	}
}
