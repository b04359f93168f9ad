package auth_test

import (
	"regexp"
	"strings"
	"testing"

	"gale/internal/platform/access"
	"gale/internal/platform/config"
	"gale/internal/platform/mail/mailtest"
	"gale/internal/testkit/apptest"
)

var linkToken = regexp.MustCompile(`token=([A-Za-z0-9_-]+)`)

func withSMTP(srv *mailtest.Server) apptest.Option {
	return func(c *config.Config) { c.SMTPURL = srv.URL(); c.SMTPFrom = "gale@example.test" }
}

// tokenFrom returns the token of the link in the only message sent to addr.
func tokenFrom(t *testing.T, srv *mailtest.Server, addr string) string {
	t.Helper()
	var found []string
	for _, m := range srv.Messages() {
		if len(m.To) == 1 && m.To[0] == addr {
			found = append(found, m.Data)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d messages to %s, want 1", len(found), addr)
	}
	match := linkToken.FindStringSubmatch(found[0])
	if match == nil {
		t.Fatalf("no link in %q", found[0])
	}
	return match[1]
}

func TestInvitationIsMailedAndAccepted(t *testing.T) {
	srv := mailtest.Start(t)
	e := apptest.New(t, withSMTP(srv))
	admin := e.Admin()
	tn := e.NewTenant(admin, "Mail")
	r := e.Must(201, tn.Partner, "POST", "/api/v1/users/invite", map[string]any{"email": "new.tech@example.test",
		"name": "New Tech", "roleId": access.RolePartnerTechnician}).Map(t)
	if r["emailSent"] != true || r["inviteUrl"] != nil {
		t.Fatalf("invite with SMTP = %v, want emailSent and no link", r)
	}
	token := tokenFrom(t, srv, "new.tech@example.test")
	e.Must(200, apptest.Anonymous, "POST", "/api/v1/auth/accept-invite", map[string]any{"token": token, "password": "Tech-Passw0rd"})
	if r, _ := login(e, "new.tech@example.test", "Tech-Passw0rd"); r.Status != 200 {
		t.Fatalf("login after accepting = %d", r.Status)
	}
}

func TestForgotPasswordIsMailed(t *testing.T) {
	srv := mailtest.Start(t)
	e := apptest.New(t, withSMTP(srv))
	e.Must(202, apptest.Anonymous, "POST", "/api/v1/auth/forgot-password", map[string]string{"email": apptest.AdminEmail})
	e.Must(202, apptest.Anonymous, "POST", "/api/v1/auth/forgot-password", map[string]string{"email": "nobody@gale.test"})
	if n := len(srv.Messages()); n != 1 {
		t.Fatalf("%d messages sent, want 1 (none for an unknown address)", n)
	}
	token := tokenFrom(t, srv, apptest.AdminEmail)
	e.Must(204, apptest.Anonymous, "POST", "/api/v1/auth/reset-password", map[string]string{"token": token, "password": "Mailed-Passw0rd"})
	if r, _ := login(e, apptest.AdminEmail, "Mailed-Passw0rd"); r.Status != 200 {
		t.Fatalf("login with the new password = %d", r.Status)
	}
}

func TestAdministratorIssuesPasswordReset(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	a := e.NewTenant(admin, "ResetA")
	b := e.NewTenant(admin, "ResetB")
	techID, _ := e.CreateUser("tech@reseta.test", access.LevelPartner, a.PartnerID, "", access.RolePartnerTechnician)
	foreignID, _ := e.CreateUser("tech@resetb.test", access.LevelPartner, b.PartnerID, "", access.RolePartnerTechnician)
	path := func(id string) string { return "/api/v1/users/" + id + "/password-reset" }

	out := e.Must(200, a.Partner, "POST", path(techID), nil).Map(t)
	url, _ := out["resetUrl"].(string)
	if out["emailSent"] != false || !strings.Contains(url, "/reset-password?token=") {
		t.Fatalf("reset without SMTP = %v, want the link", out)
	}
	token := url[strings.Index(url, "token=")+6:]
	e.Must(204, apptest.Anonymous, "POST", "/api/v1/auth/reset-password", map[string]string{"token": token, "password": "Given-Passw0rd"})
	if r, _ := login(e, "tech@reseta.test", "Given-Passw0rd"); r.Status != 200 {
		t.Fatalf("login with the reset password = %d", r.Status)
	}
	if r := e.Do(a.Partner, "POST", path(foreignID), nil); r.Status != 404 {
		t.Fatalf("reset of another partner's user = %d, want 404", r.Status)
	}
	_, tech := e.CreateUser("manager@reseta.test", access.LevelPartner, a.PartnerID, "", access.RolePartnerViewer)
	if r := e.Do(tech, "POST", path(techID), nil); r.Status != 403 {
		t.Fatalf("reset by a viewer = %d, want 403", r.Status)
	}
	var adminID string
	if err := e.App.DB.SQL.QueryRow(`SELECT id FROM users WHERE email = $1`, "resetb-partner@gale.test").Scan(&adminID); err != nil {
		t.Fatal(err)
	}
	if r := e.Do(a.Partner, "POST", path(adminID), nil); r.Status != 404 {
		t.Fatalf("reset of another partner's admin = %d, want 404", r.Status)
	}
}

func TestMailFailureIsABadGateway(t *testing.T) {
	e := apptest.New(t, func(c *config.Config) { c.SMTPURL = "smtp://127.0.0.1:1" })
	admin := e.Admin()
	a := e.NewTenant(admin, "Down")
	techID, _ := e.CreateUser("tech@down.test", access.LevelPartner, a.PartnerID, "", access.RolePartnerTechnician)
	r := e.Do(a.Partner, "POST", "/api/v1/users/"+techID+"/password-reset", nil)
	if r.Status != 502 || r.ErrorCode() != "MAIL_FAILED" || strings.Contains(string(r.Body), "127.0.0.1") {
		t.Fatalf("reset with the mail server down = %d %s, want 502 MAIL_FAILED without internals", r.Status, r.Body)
	}
}
