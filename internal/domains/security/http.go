package security

import (
	"context"
	"net/http"

	"gale/internal/platform/access"
	"gale/internal/platform/httpapi"
	"gale/internal/wire/agentproto"
)

type deviceIDPath struct {
	DeviceID string `path:"deviceId" format:"uuid" doc:"The device."`
}

type statusListInput struct {
	httpapi.PageQuery
	OrgID  string `query:"orgId" format:"uuid"`
	SiteID string `query:"siteId" format:"uuid"`
	State  string `query:"state" enum:"protected,at_risk,unprotected,offline"`
}

type statusOutput struct{ Body SecurityStatusDetail }

type threatListInput struct {
	httpapi.PageQuery
	OrgID    string `query:"orgId" format:"uuid"`
	Status   string `query:"status" enum:"active,quarantined,removed"`
	Severity string `query:"severity" enum:"critical,high,medium,low"`
	Category string `query:"category" maxLength:"100"`
}

type deviceThreatsInput struct {
	httpapi.PageQuery
	DeviceID string `path:"deviceId" format:"uuid" doc:"The device."`
	Status   string `query:"status" enum:"active,quarantined,removed"`
	Severity string `query:"severity" enum:"critical,high,medium,low"`
}

type threatIDPath struct {
	ID string `path:"id" format:"uuid" doc:"The threat."`
}

type threatActionOutput struct{ Body SecurityThreatAction }

type scanInput struct {
	DeviceID string `path:"deviceId" format:"uuid" doc:"The device."`
	Body     SecurityScanInput
}

type scanOutput struct{ Body SecurityScanRun }

type deviceScansInput struct {
	httpapi.PageQuery
	DeviceID string `path:"deviceId" format:"uuid" doc:"The device."`
}

type policyListInput struct {
	httpapi.PageQuery
	OrgID string `query:"orgId" format:"uuid"`
}

type policyCreateInput struct{ Body SecurityPolicyInput }

type policyUpdateInput struct {
	ID   string `path:"id" format:"uuid" doc:"The policy."`
	Body SecurityPolicyInput
}

type policyOutput struct{ Body SecurityPolicy }

type orgQuery struct {
	OrgID string `query:"orgId" format:"uuid"`
}

type dashboardOutput struct{ Body SecurityDashboard }

type breakdownOutput struct{ Body SecurityScoreBreakdown }

type orgPageInput struct {
	httpapi.PageQuery
	OrgID string `query:"orgId" format:"uuid"`
}

type postureOutput struct{ Body SecurityPosture }

type trendsInput struct {
	OrgID string `query:"orgId" format:"uuid"`
	Days  int    `query:"days" minimum:"1" maximum:"365" default:"30" doc:"How many days back, today included (1 to 365, default 30)."`
}

type trendsOutput struct {
	Body struct {
		Days   int                  `json:"days"`
		Points []SecurityTrendPoint `json:"points" doc:"One per day with a snapshot, oldest first."`
	}
}

type firewallInput struct {
	httpapi.PageQuery
	OrgID   string `query:"orgId" format:"uuid"`
	Enabled string `query:"enabled" enum:"true,false"`
}

type encryptionInput struct {
	httpapi.PageQuery
	OrgID  string `query:"orgId" format:"uuid"`
	Status string `query:"status" enum:"encrypted,partial,unencrypted,unknown"`
}

type recommendationsInput struct {
	OrgID            string `query:"orgId" format:"uuid"`
	IncludeDismissed bool   `query:"includeDismissed" doc:"Include dismissed recommendations."`
}

type recommendationsOutput struct {
	Body struct {
		Data []SecurityRecommendation `json:"data"`
	}
}

type recIDPath struct {
	ID string `path:"id" maxLength:"100" doc:"The recommendation: <key>:<orgId>."`
}

type recOutput struct{ Body SecurityRecommendation }

func listOf[T any](rows []T, next string, page httpapi.PageQuery, total *int, err error) (*httpapi.ListBody[T], error) {
	if err != nil {
		return nil, err
	}
	p, _ := page.Normalize(httpapi.MaxPageSize)
	return httpapi.ListPage(rows, next, p, total), nil
}

// Register adds the /security routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Security"
	route := func(id, method, path string, perm access.Perm, summary, desc string, errors ...int) httpapi.Route {
		return httpapi.Route{ID: id, Method: method, Path: path, Tag: tag, Permission: perm, Summary: summary, Description: desc, Errors: errors}
	}
	R, W := access.SecurityRead, access.SecurityWrite
	httpapi.Register(api, route("list-security-status", http.MethodGet, "/security/status", R, "List devices' security status",
		"Devices in scope whose agent reported its security status, by device ID."),
		func(ctx context.Context, in *statusListInput) (*httpapi.ListBody[SecurityDeviceStatus], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListStatuses(ctx, StatusFilter{OrgID: in.OrgID, SiteID: in.SiteID, State: in.State}, page)
			return listOf(rows, next, in.PageQuery, total, err)
		})
	httpapi.Register(api, route("get-security-status", http.MethodGet, "/security/status/{deviceId}", R, "Get a device's security status",
		"With everything the agent reported; before the first report, state pending with nextCollectionAt. 404 for a device out of scope or decommissioned.",
		http.StatusNotFound),
		func(ctx context.Context, in *deviceIDPath) (*statusOutput, error) {
			d, err := s.GetStatus(ctx, in.DeviceID)
			return &statusOutput{d}, err
		})
	httpapi.Register(api, route("list-security-threats", http.MethodGet, "/security/threats", R, "List threats",
		"Threats in scope, most recently found first."),
		func(ctx context.Context, in *threatListInput) (*httpapi.ListBody[SecurityThreat], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListThreats(ctx, ThreatFilter{OrgID: in.OrgID, Status: in.Status, Severity: in.Severity, Category: in.Category}, page)
			return listOf(rows, next, in.PageQuery, total, err)
		})
	httpapi.Register(api, route("list-device-security-threats", http.MethodGet, "/security/threats/{deviceId}", R, "List a device's threats",
		"Most recently found first.", http.StatusNotFound),
		func(ctx context.Context, in *deviceThreatsInput) (*httpapi.ListBody[SecurityThreat], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListThreats(ctx, ThreatFilter{DeviceID: in.DeviceID, Status: in.Status, Severity: in.Severity}, page)
			return listOf(rows, next, in.PageQuery, total, err)
		})
	for _, act := range []struct{ action, summary, desc string }{
		{agentproto.ThreatQuarantine, "Quarantine a threat", "Moves the file into the agent's quarantine (a 0700 directory). From active."},
		{agentproto.ThreatRemove, "Remove a threat", "Deletes the file (from the quarantine when quarantined). From active or quarantined."},
		{agentproto.ThreatRestore, "Restore a threat", "Puts a quarantined file back where it was. From quarantined."},
	} {
		r := route(act.action+"-security-threat", http.MethodPost, "/security/threats/{id}/"+act.action, W, act.summary, act.desc+
			" Queues a threat_action command and answers 202 with the threat still in its old status and pendingAction set: the status "+
			"moves when the agent confirms. 409 ACTION_PENDING while another action awaits the agent, 409 INVALID_THREAT_STATE when the "+
			"status does not allow it.", http.StatusNotFound, http.StatusConflict)
		r.Status = http.StatusAccepted
		action := act.action
		httpapi.Register(api, r, func(ctx context.Context, in *threatIDPath) (*threatActionOutput, error) {
			out, err := s.Act(ctx, in.ID, action)
			return &threatActionOutput{out}, err
		})
	}
	scan := route("start-security-scan", http.MethodPost, "/security/scan/{deviceId}", W, "Scan a device for threats",
		"Queues a security_scan (ClamAV when installed, else the built-in signatures) and a refresh of the device's status; 202 with the scan.",
		http.StatusNotFound, http.StatusConflict)
	scan.Status = http.StatusAccepted
	httpapi.Register(api, scan, func(ctx context.Context, in *scanInput) (*scanOutput, error) {
		x, err := s.StartScan(ctx, in.DeviceID, in.Body)
		return &scanOutput{x}, err
	})
	httpapi.Register(api, route("list-security-scans", http.MethodGet, "/security/scans/{deviceId}", R, "List a device's scans",
		"Newest first.", http.StatusNotFound),
		func(ctx context.Context, in *deviceScansInput) (*httpapi.ListBody[SecurityScanRun], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListScans(ctx, in.DeviceID, page)
			return listOf(rows, next, in.PageQuery, total, err)
		})
	httpapi.Register(api, route("list-security-policies", http.MethodGet, "/security/policies", R, "List security policies",
		"Organizations' policies and partners' defaults in scope."),
		func(ctx context.Context, in *policyListInput) (*httpapi.ListBody[SecurityPolicy], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListPolicies(ctx, in.OrgID, page)
			return listOf(rows, next, in.PageQuery, total, err)
		})
	create := route("create-security-policy", http.MethodPost, "/security/policies", W, "Create a security policy",
		"One per organization, one default per partner (orgId absent): 409 POLICY_EXISTS otherwise.", http.StatusConflict)
	create.Status = http.StatusCreated
	httpapi.Register(api, create, func(ctx context.Context, in *policyCreateInput) (*policyOutput, error) {
		p, err := s.CreatePolicy(ctx, in.Body)
		return &policyOutput{p}, err
	})
	httpapi.Register(api, route("replace-security-policy", http.MethodPut, "/security/policies/{id}", W, "Replace a security policy",
		"Replaces the settings (orgId and partnerId of the body are ignored); devices are judged again at once.", http.StatusNotFound),
		func(ctx context.Context, in *policyUpdateInput) (*policyOutput, error) {
			p, err := s.UpdatePolicy(ctx, in.ID, in.Body)
			return &policyOutput{p}, err
		})
	httpapi.Register(api, route("get-security-dashboard", http.MethodGet, "/security/dashboard", R, "Security dashboard",
		"Devices by state and risk band, the average score, active threats by severity and protection counts."),
		func(ctx context.Context, in *orgQuery) (*dashboardOutput, error) {
			d, err := s.Dashboard(ctx, in.OrgID)
			return &dashboardOutput{d}, err
		})
	httpapi.Register(api, route("get-security-score-breakdown", http.MethodGet, "/security/score-breakdown", R, "Security score breakdown",
		"Each factor's weight, the average points the devices earn and how many fall short (the weighting is in the API notes)."),
		func(ctx context.Context, in *orgQuery) (*breakdownOutput, error) {
			b, err := s.ScoreBreakdown(ctx, in.OrgID)
			return &breakdownOutput{b}, err
		})
	httpapi.Register(api, route("list-security-posture", http.MethodGet, "/security/posture", R, "List devices' security posture",
		"Each device's score, risk band, factors and unmet policy requirements."),
		func(ctx context.Context, in *orgPageInput) (*httpapi.ListBody[SecurityPosture], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.Postures(ctx, in.OrgID, page)
			return listOf(rows, next, in.PageQuery, total, err)
		})
	httpapi.Register(api, route("get-security-posture", http.MethodGet, "/security/posture/{deviceId}", R, "Get a device's security posture",
		"", http.StatusNotFound),
		func(ctx context.Context, in *deviceIDPath) (*postureOutput, error) {
			p, err := s.Posture(ctx, in.DeviceID)
			return &postureOutput{p}, err
		})
	httpapi.Register(api, route("get-security-trends", http.MethodGet, "/security/trends", R, "Security trends",
		"Daily snapshots (one per organization per UTC day) summed over the organizations in scope."),
		func(ctx context.Context, in *trendsInput) (*trendsOutput, error) {
			days := in.Days
			if days == 0 {
				days = 30
			}
			pts, err := s.Trends(ctx, in.OrgID, days)
			out := &trendsOutput{}
			out.Body.Days, out.Body.Points = days, pts
			return out, err
		})
	httpapi.Register(api, route("list-security-firewall", http.MethodGet, "/security/firewall", R, "List devices' firewalls", ""),
		func(ctx context.Context, in *firewallInput) (*httpapi.ListBody[SecurityFirewallRow], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.Firewalls(ctx, in.OrgID, in.Enabled, page)
			return listOf(rows, next, in.PageQuery, total, err)
		})
	httpapi.Register(api, route("list-security-encryption", http.MethodGet, "/security/encryption", R, "List devices' disk encryption", ""),
		func(ctx context.Context, in *encryptionInput) (*httpapi.ListBody[SecurityEncryptionRow], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.Encryption(ctx, in.OrgID, in.Status, page)
			return listOf(rows, next, in.PageQuery, total, err)
		})
	httpapi.Register(api, route("list-security-password-policy", http.MethodGet, "/security/password-policy", R, "List devices' password policies",
		"Judged against the security policy that applies."),
		func(ctx context.Context, in *orgPageInput) (*httpapi.ListBody[SecurityPasswordPolicyRow], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.PasswordPolicies(ctx, in.OrgID, page)
			return listOf(rows, next, in.PageQuery, total, err)
		})
	httpapi.Register(api, route("list-security-admin-audit", http.MethodGet, "/security/admin-audit", R, "Administrator audit",
		"Per device: administrators and findings (default accounts, stale accounts, other uid-0 accounts, too many administrators, weak password policy)."),
		func(ctx context.Context, in *orgPageInput) (*httpapi.ListBody[SecurityAdminAuditRow], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.AdminAudit(ctx, in.OrgID, page)
			return listOf(rows, next, in.PageQuery, total, err)
		})
	httpapi.Register(api, route("list-security-recommendations", http.MethodGet, "/security/recommendations", R, "List recommendations",
		"Derived from the current statuses, per organization, by priority; dismissed ones only with includeDismissed."),
		func(ctx context.Context, in *recommendationsInput) (*recommendationsOutput, error) {
			recs, err := s.Recommendations(ctx, in.OrgID, in.IncludeDismissed)
			out := &recommendationsOutput{}
			out.Body.Data = recs
			return out, err
		})
	for _, st := range []struct{ verb, status string }{{"complete", RecCompleted}, {"dismiss", RecDismissed}} {
		status := st.status
		httpapi.Register(api, route(st.verb+"-security-recommendation", http.MethodPost, "/security/recommendations/{id}/"+st.verb, W,
			"Mark a recommendation "+st.status, "Kept per organization. 409 RECOMMENDATION_UNCHANGED when it is "+st.status+" already.",
			http.StatusNotFound, http.StatusConflict),
			func(ctx context.Context, in *recIDPath) (*recOutput, error) {
				r, err := s.SetRecommendation(ctx, in.ID, status)
				return &recOutput{r}, err
			})
	}
}
