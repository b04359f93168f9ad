package console

import (
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gale/internal/domains/alertchannels"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
)

// channelTypes are the kinds of notification channel, in the order the forms offer them.
var channelTypes = []string{alertchannels.TypeEmail, alertchannels.TypeSlack, alertchannels.TypeTeams, alertchannels.TypeWebhook,
	alertchannels.TypePagerDuty, alertchannels.TypeSMS}

// channelsPage lists the notification channels in scope, newest first.
type channelsPage struct {
	settingsTab
	Channels  []alertchannels.NotificationChannel
	Next      string
	CanCreate bool
}

func (c *Console) channelList(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "list-alert-channels"); err != nil {
		return err
	}
	list, next, _, err := c.Channels.ListChannels(ctx, "", "", store.Page{Limit: settingsListSize, Cursor: r.URL.Query().Get("cursor")})
	if err != nil {
		return err
	}
	pg := channelsPage{settingsTab: "channels", Channels: list, Next: nextPage(r, next), CanCreate: c.HTTP.Permits(ctx, "create-alert-channel")}
	return c.render(w, r, http.StatusOK, "channels", "", view{Title: "Notification channels", Section: "settings", Data: pg})
}

// channelPage is one channel: its settings (secrets masked), its latest deliveries, and the
// outcome of a test just sent.
type channelPage struct {
	settingsTab
	Channel          alertchannels.NotificationChannel
	Deliveries       []alertchannels.NotificationDelivery
	CanEdit, CanTest bool
	CanDeliveries    bool
	Test             *alertchannels.NotificationDelivery
	Headers          []string
	CanDelete        bool
}

// channelDeliveriesShown is how many of a channel's latest deliveries its page lists.
const channelDeliveriesShown = 25

func (c *Console) channelDetail(w http.ResponseWriter, r *http.Request) error {
	pg, err := c.channelData(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	return c.render(w, r, http.StatusOK, "channel", "", view{Title: pg.Channel.Name, Section: "settings", Data: pg})
}

func (c *Console) channelData(r *http.Request, id string) (channelPage, error) {
	ctx := r.Context()
	if err := c.allow(ctx, "get-alert-channel"); err != nil {
		return channelPage{}, err
	}
	ch, err := c.Channels.GetChannel(ctx, id)
	if err != nil {
		return channelPage{}, err
	}
	can := c.HTTP.Permits(ctx, "update-alert-channel")
	pg := channelPage{settingsTab: "channels", Channel: ch, CanEdit: can, CanTest: c.HTTP.Permits(ctx, "test-alert-channel"),
		CanDelete: c.HTTP.Permits(ctx, "delete-alert-channel"), CanDeliveries: c.HTTP.Permits(ctx, "list-alert-channel-deliveries")}
	for name := range ch.Config.Headers {
		pg.Headers = append(pg.Headers, name)
	}
	sort.Strings(pg.Headers)
	if pg.CanDeliveries {
		if pg.Deliveries, _, _, err = c.Channels.Deliveries(ctx, ch.ID, "", store.Page{Limit: channelDeliveriesShown}); err != nil {
			return pg, err
		}
	}
	return pg, nil
}

// channelForm is the editor of a channel: the fields of its type.
type channelForm struct {
	settingsTab
	Channel alertchannels.NotificationChannel
	New     bool
	Types   []string
	// PartnerWide offers a channel for every organization of the partner.
	PartnerWide bool
	// Recipients, PhoneNumbers and Headers are the list fields as their text areas show them.
	Recipients, PhoneNumbers, Headers string
	MaxPerHour                        int
	Error                             *apperr.Error
}

func (c *Console) channelNew(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "create-alert-channel"); err != nil {
		return err
	}
	typ := r.URL.Query().Get("type")
	if typ == "" {
		typ = alertchannels.TypeEmail
	}
	if !slices.Contains(channelTypes, typ) {
		return apperr.Invalid("type", "one of email, slack, teams, webhook, pagerduty, sms")
	}
	org := c.currentOrg(r)
	return c.channelEditor(w, r, http.StatusOK, channelForm{New: true, Channel: alertchannels.NotificationChannel{Type: typ,
		Enabled: true, OrgID: &org}})
}

func (c *Console) channelEdit(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "update-alert-channel"); err != nil {
		return err
	}
	ch, err := c.Channels.GetChannel(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	return c.channelEditor(w, r, http.StatusOK, channelForm{Channel: ch})
}

func (c *Console) channelEditor(w http.ResponseWriter, r *http.Request, status int, f channelForm) error {
	f.settingsTab, f.Types = "channels", channelTypes
	f.PartnerWide = f.New && partnerWideChoice(r.Context())
	cfg := f.Channel.Config
	if f.Recipients == "" {
		f.Recipients = strings.Join(cfg.Recipients, "\n")
	}
	if f.PhoneNumbers == "" {
		f.PhoneNumbers = strings.Join(cfg.PhoneNumbers, "\n")
	}
	if f.Headers == "" && len(cfg.Headers) > 0 {
		var lines []string
		for k, v := range cfg.Headers {
			lines = append(lines, k+": "+v)
		}
		sort.Strings(lines)
		f.Headers = strings.Join(lines, "\n")
	}
	if f.Channel.Throttle != nil && f.MaxPerHour == 0 {
		f.MaxPerHour = f.Channel.Throttle.MaxPerHour
	}
	title := "New notification channel"
	if !f.New {
		title = "Edit " + f.Channel.Name
	}
	return c.render(w, r, status, "channel-edit", "", view{Title: title, Section: "settings", Data: f})
}

// lines splits a text area into its entries: one a line, or separated by commas.
func lines(s string) []string {
	var out []string
	for _, l := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' || r == ',' }) {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// headerLines reads "Name: value" lines; a line without a colon is refused.
func headerLines(field, s string) (map[string]string, error) {
	var out map[string]string
	for _, l := range strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		name, value, ok := strings.Cut(l, ":")
		if !ok {
			return nil, apperr.Invalid(field, "one header a line, as Name: value")
		}
		if out == nil {
			out = map[string]string{}
		}
		out[strings.TrimSpace(name)] = strings.TrimSpace(value)
	}
	return out, nil
}

// channelConfig reads the fields of the form that a channel of type typ has.
func channelConfig(typ string, form url.Values) (alertchannels.ChannelConfig, error) {
	var cfg alertchannels.ChannelConfig
	switch typ {
	case alertchannels.TypeEmail:
		cfg.Recipients = lines(form.Get("recipients"))
	case alertchannels.TypeSlack, alertchannels.TypeTeams:
		cfg.WebhookURL = strings.TrimSpace(form.Get("webhookUrl"))
	case alertchannels.TypeWebhook:
		cfg.URL, cfg.Method, cfg.AuthType = strings.TrimSpace(form.Get("url")), form.Get("method"), form.Get("authType")
		cfg.Token, cfg.Username, cfg.Password, cfg.Secret = form.Get("token"), form.Get("username"), form.Get("password"), form.Get("secret")
		h, err := headerLines("config.headers", form.Get("headers"))
		if err != nil {
			return cfg, err
		}
		cfg.Headers = h
	case alertchannels.TypePagerDuty:
		cfg.RoutingKey, cfg.BaseURL = strings.TrimSpace(form.Get("routingKey")), strings.TrimSpace(form.Get("baseUrl"))
	case alertchannels.TypeSMS:
		cfg.PhoneNumbers = lines(form.Get("phoneNumbers"))
		cfg.Provider = &alertchannels.SMSProvider{AccountSID: strings.TrimSpace(form.Get("provider.accountSid")),
			AuthToken: form.Get("provider.authToken"), From: strings.TrimSpace(form.Get("provider.from")),
			BaseURL: strings.TrimSpace(form.Get("provider.baseUrl"))}
	}
	return cfg, nil
}

// channelThrottle reads the hourly cap; empty or 0 is none.
func channelThrottle(form url.Values) (*alertchannels.ChannelThrottle, error) {
	v := strings.TrimSpace(form.Get("maxPerHour"))
	if v == "" {
		return &alertchannels.ChannelThrottle{}, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return nil, apperr.Invalid("throttle.maxPerHour", "a whole number from 1 to 10000, or 0 for none")
	}
	return &alertchannels.ChannelThrottle{MaxPerHour: n}, nil
}

// channelEcho is the channel as the form sent it, to show it again after a refusal.
func channelEcho(base alertchannels.NotificationChannel, form url.Values, cfg alertchannels.ChannelConfig) channelForm {
	base.Name, base.Enabled, base.Config = form.Get("name"), form.Get("enabled") != "", cfg
	f := channelForm{Channel: base, Recipients: form.Get("recipients"), PhoneNumbers: form.Get("phoneNumbers"), Headers: form.Get("headers")}
	f.MaxPerHour, _ = strconv.Atoi(form.Get("maxPerHour"))
	return f
}

func (c *Console) channelCreate(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "create-alert-channel"); err != nil {
		return err
	}
	form := r.PostForm
	typ, org := form.Get("type"), form.Get("orgId")
	enabled := form.Get("enabled") != ""
	cfg, err := channelConfig(typ, form)
	var ch alertchannels.NotificationChannel
	if err == nil {
		var throttle *alertchannels.ChannelThrottle
		if throttle, err = channelThrottle(form); err == nil {
			if throttle.MaxPerHour == 0 {
				throttle = nil
			}
			ch, err = c.Channels.CreateChannel(ctx, alertchannels.NewChannel{OrgID: org, Name: form.Get("name"), Type: typ,
				Config: cfg, Enabled: &enabled, Throttle: throttle})
		}
	}
	if err != nil {
		ae := formRefusal(err)
		if ae == nil {
			return err
		}
		if !slices.Contains(channelTypes, typ) {
			return ae
		}
		f := channelEcho(alertchannels.NotificationChannel{Type: typ, OrgID: &org}, form, cfg)
		f.New, f.Error = true, ae
		return c.channelEditor(w, r, httpapi.StatusOf(ae), f)
	}
	http.Redirect(w, r, "/settings/channels/"+ch.ID, http.StatusSeeOther)
	return nil
}

// channelUpdate saves the editor's form as the channel's whole state; secrets left empty
// keep their stored value, as the API's change does.
func (c *Console) channelUpdate(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "update-alert-channel"); err != nil {
		return err
	}
	before, err := c.Channels.GetChannel(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	form := r.PostForm
	name, enabled := form.Get("name"), form.Get("enabled") != ""
	cfg, err := channelConfig(before.Type, form)
	if err == nil {
		var throttle *alertchannels.ChannelThrottle
		if throttle, err = channelThrottle(form); err == nil {
			_, err = c.Channels.UpdateChannel(ctx, before.ID, alertchannels.ChannelUpdate{Name: &name, Config: &cfg, Enabled: &enabled,
				Throttle: throttle})
		}
	}
	if err != nil {
		ae := formRefusal(err)
		if ae == nil {
			return err
		}
		f := channelEcho(before, form, cfg)
		f.Error = ae
		return c.channelEditor(w, r, httpapi.StatusOf(ae), f)
	}
	http.Redirect(w, r, "/settings/channels/"+before.ID, http.StatusSeeOther)
	return nil
}

// channelTest sends a test notification now and shows how it went: in the page's test
// area for htmx, or on the channel's page.
func (c *Console) channelTest(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "test-alert-channel"); err != nil {
		return err
	}
	d, err := c.Channels.Test(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	if r.Header.Get("HX-Request") != "" {
		return c.render(w, r, http.StatusOK, "channel", "channel-test", view{Data: channelPage{Test: &d}})
	}
	pg, err := c.channelData(r, d.ChannelID)
	if err != nil {
		return err
	}
	pg.Test = &d
	return c.render(w, r, http.StatusOK, "channel", "", view{Title: pg.Channel.Name, Section: "settings", Data: pg})
}

func (c *Console) channelDelete(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "delete-alert-channel"); err != nil {
		return err
	}
	if err := c.Channels.DeleteChannel(ctx, r.PathValue("id")); err != nil {
		return err
	}
	afterChange(w, r, "/settings/channels")
	return nil
}
