package console

import (
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"gale/internal/domains/webhooks"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
)

// webhookEvents are the event types and wildcards the editor offers as checkboxes, by family;
// other patterns (audit.<action>) are typed.
var webhookEvents = []struct {
	Family string
	Types  []string
}{
	{"All events", []string{"*"}},
	{"Devices", []string{"device.*", "device.enrolled", "device.online", "device.offline", "device.main_agent_silent", "device.decommissioned"}},
	{"Alerts", []string{"alert.*", "alert.triggered", "alert.acknowledged", "alert.resolved", "alert.suppressed", "alert.dismissed"}},
	{"Audit log", []string{"audit.*"}},
}

func offeredEvent(e string) bool {
	for _, f := range webhookEvents {
		if slices.Contains(f.Types, e) {
			return true
		}
	}
	return false
}

// webhooksPage lists the webhook subscriptions in scope, newest first.
type webhooksPage struct {
	settingsTab
	Webhooks  []webhooks.Webhook
	Next      string
	CanCreate bool
}

func (c *Console) webhookList(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "list-webhooks"); err != nil {
		return err
	}
	list, next, _, err := c.Webhooks.List(ctx, "", store.Page{Limit: settingsListSize, Cursor: r.URL.Query().Get("cursor")})
	if err != nil {
		return err
	}
	pg := webhooksPage{settingsTab: "webhooks", Webhooks: list, Next: nextPage(r, next), CanCreate: c.HTTP.Permits(ctx, "create-webhook")}
	return c.render(w, r, http.StatusOK, "webhooks", "", view{Title: "Webhooks", Section: "settings", Data: pg})
}

// webhookPage is one subscription with its latest deliveries; Secret is set only in the
// answer that created or rotated it, and Test after a test was sent.
type webhookPage struct {
	settingsTab
	Webhook       webhooks.Webhook
	Headers       []string
	Deliveries    []webhooks.Delivery
	CanDeliveries bool
	CanWrite      bool
	Secret        string
	Created       bool
	Test          *webhooks.Delivery
	Done          string
}

// webhookDeliveriesShown is how many of a subscription's latest deliveries its page lists.
const webhookDeliveriesShown = 25

func (c *Console) webhookData(r *http.Request, id string) (webhookPage, error) {
	ctx := r.Context()
	if err := c.allow(ctx, "get-webhook"); err != nil {
		return webhookPage{}, err
	}
	wh, err := c.Webhooks.Get(ctx, id)
	if err != nil {
		return webhookPage{}, err
	}
	pg := webhookPage{settingsTab: "webhooks", Webhook: wh, CanWrite: c.HTTP.Permits(ctx, "update-webhook"),
		CanDeliveries: c.HTTP.Permits(ctx, "list-webhook-deliveries")}
	for name := range wh.Headers {
		pg.Headers = append(pg.Headers, name)
	}
	sort.Strings(pg.Headers)
	if pg.CanDeliveries {
		if pg.Deliveries, _, _, err = c.Webhooks.Deliveries(ctx, wh.ID, "", store.Page{Limit: webhookDeliveriesShown}); err != nil {
			return pg, err
		}
	}
	return pg, nil
}

func (c *Console) webhookDetail(w http.ResponseWriter, r *http.Request) error {
	pg, err := c.webhookData(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	pg.Done = r.URL.Query().Get("done")
	return c.render(w, r, http.StatusOK, "webhook", "", view{Title: pg.Webhook.Name, Section: "settings", Data: pg})
}

// webhookForm is the editor of a subscription.
type webhookForm struct {
	settingsTab
	Webhook     webhooks.Webhook
	New         bool
	PartnerWide bool
	Families    any
	// More are the patterns beyond the checkboxes, as typed; Headers the extra headers'
	// lines of a new subscription.
	More, Headers string
	Error         *apperr.Error
}

// HasEvent tells whether the subscription selects the pattern.
func (f webhookForm) HasEvent(e string) bool { return slices.Contains(f.Webhook.Events, e) }

func (c *Console) webhookNew(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "create-webhook"); err != nil {
		return err
	}
	org := c.currentOrg(r)
	return c.webhookEditor(w, r, http.StatusOK, webhookForm{New: true, Webhook: webhooks.Webhook{Enabled: true, OrgID: &org,
		Events: []string{"alert.*"}}})
}

func (c *Console) webhookEdit(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "update-webhook"); err != nil {
		return err
	}
	wh, err := c.Webhooks.Get(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	return c.webhookEditor(w, r, http.StatusOK, webhookForm{Webhook: wh})
}

func (c *Console) webhookEditor(w http.ResponseWriter, r *http.Request, status int, f webhookForm) error {
	f.settingsTab, f.Families = "webhooks", webhookEvents
	f.PartnerWide = f.New && partnerWideChoice(r.Context())
	if f.More == "" {
		var more []string
		for _, e := range f.Webhook.Events {
			if !offeredEvent(e) {
				more = append(more, e)
			}
		}
		f.More = strings.Join(more, ", ")
	}
	title := "New webhook"
	if !f.New {
		title = "Edit " + f.Webhook.Name
	}
	return c.render(w, r, status, "webhook-edit", "", view{Title: title, Section: "settings", Data: f})
}

// webhookEventsOf reads the ticked events and the typed patterns.
func webhookEventsOf(form url.Values) []string {
	evs := slices.Clone(form["events"])
	for _, e := range lines(form.Get("moreEvents")) {
		if !slices.Contains(evs, e) {
			evs = append(evs, e)
		}
	}
	return evs
}

func (c *Console) webhookCreate(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "create-webhook"); err != nil {
		return err
	}
	form := r.PostForm
	enabled := form.Get("enabled") != ""
	in := webhooks.NewWebhook{OrgID: form.Get("orgId"), Name: form.Get("name"), URL: strings.TrimSpace(form.Get("url")),
		Events: webhookEventsOf(form), Enabled: &enabled}
	headers, err := headerLines("headers", form.Get("headers"))
	var wh webhooks.Webhook
	if err == nil {
		in.Headers = headers
		wh, err = c.Webhooks.Create(ctx, in)
	}
	if err != nil {
		ae := formRefusal(err)
		if ae == nil {
			return err
		}
		return c.webhookEditor(w, r, httpapi.StatusOf(ae), webhookForm{New: true, Error: ae, More: form.Get("moreEvents"),
			Headers: form.Get("headers"), Webhook: webhooks.Webhook{Name: in.Name, URL: in.URL, Events: form["events"], Enabled: enabled,
				OrgID: &in.OrgID}})
	}
	pg, err := c.webhookData(r, wh.ID)
	if err != nil {
		return err
	}
	pg.Secret, pg.Created = wh.Secret, true
	return c.render(w, r, http.StatusCreated, "webhook", "", view{Title: wh.Name, Section: "settings", Data: pg})
}

// webhookUpdate saves the editor's form; the extra headers stay unless new ones are typed or
// their removal is ticked (their values are never shown again).
func (c *Console) webhookUpdate(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "update-webhook"); err != nil {
		return err
	}
	before, err := c.Webhooks.Get(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	form := r.PostForm
	name, target, enabled := form.Get("name"), strings.TrimSpace(form.Get("url")), form.Get("enabled") != ""
	in := webhooks.WebhookUpdate{Name: &name, URL: &target, Events: webhookEventsOf(form), Enabled: &enabled}
	if in.Events == nil {
		in.Events = []string{}
	}
	headers, err := headerLines("headers", form.Get("headers"))
	if err == nil {
		switch {
		case headers != nil:
			in.Headers = headers
		case form.Get("clearHeaders") != "":
			in.Headers = map[string]string{}
		}
		// Nothing ticked is an empty list, which the service refuses, not an absent one.
		_, err = c.Webhooks.Update(ctx, before.ID, in)
	}
	if err != nil {
		ae := formRefusal(err)
		if ae == nil {
			return err
		}
		before.Name, before.URL, before.Events, before.Enabled = name, target, form["events"], enabled
		return c.webhookEditor(w, r, httpapi.StatusOf(ae), webhookForm{Webhook: before, Error: ae, More: form.Get("moreEvents"),
			Headers: form.Get("headers")})
	}
	http.Redirect(w, r, "/settings/webhooks/"+before.ID+"?done=saved", http.StatusSeeOther)
	return nil
}

// webhookTest sends a webhook.test event now and shows how it went.
func (c *Console) webhookTest(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "test-webhook"); err != nil {
		return err
	}
	d, err := c.Webhooks.Test(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	if r.Header.Get("HX-Request") != "" {
		return c.render(w, r, http.StatusOK, "webhook", "webhook-test", view{Data: webhookPage{Test: &d}})
	}
	pg, err := c.webhookData(r, d.WebhookID)
	if err != nil {
		return err
	}
	pg.Test = &d
	return c.render(w, r, http.StatusOK, "webhook", "", view{Title: pg.Webhook.Name, Section: "settings", Data: pg})
}

// webhookRotate replaces the signing secret and shows the new one once.
func (c *Console) webhookRotate(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "rotate-webhook-secret"); err != nil {
		return err
	}
	wh, err := c.Webhooks.RotateSecret(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	pg, err := c.webhookData(r, wh.ID)
	if err != nil {
		return err
	}
	pg.Secret = wh.Secret
	return c.render(w, r, http.StatusOK, "webhook", "", view{Title: wh.Name, Section: "settings", Data: pg})
}

// webhookRetry queues a dead or retrying delivery again, as the API's retry does.
func (c *Console) webhookRetry(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "retry-webhook-delivery"); err != nil {
		return err
	}
	d, err := c.Webhooks.Retry(ctx, r.PathValue("id"), r.PathValue("delivery"))
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/settings/webhooks/"+d.WebhookID+"?done=retry", http.StatusSeeOther)
	return nil
}

func (c *Console) webhookDelete(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "delete-webhook"); err != nil {
		return err
	}
	if err := c.Webhooks.Delete(ctx, r.PathValue("id")); err != nil {
		return err
	}
	afterChange(w, r, "/settings/webhooks")
	return nil
}
