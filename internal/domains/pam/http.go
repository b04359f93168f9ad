package pam

import (
	"context"
	"net/http"

	"gale/internal/platform/access"
	"gale/internal/platform/httpapi"
)

type pamIDPath struct {
	ID string `path:"id" format:"uuid"`
}

type pamRuleOutput struct{ Body PAMRule }

type pamRuleCreateInput struct{ Body PAMRuleInput }

type pamRuleUpdateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body PAMRuleUpdate
}

// PAMRuleBulkUpdate changes several rules in one transaction.
type PAMRuleBulkUpdate struct {
	Rules []PAMRuleBulkItem `json:"rules" minItems:"1" maxItems:"100"`
}

type pamRuleBulkInput struct{ Body PAMRuleBulkUpdate }

// PAMRuleList is the answer of a bulk update: the rules as changed, in the order sent.
type PAMRuleList struct {
	Data []PAMRule `json:"data"`
}

type pamRuleListOutput struct{ Body PAMRuleList }

type pamRuleListInput struct {
	httpapi.PageQuery
	OrgID   string `query:"orgId" format:"uuid"`
	SiteID  string `query:"siteId" format:"uuid"`
	Verdict string `query:"verdict" enum:"auto_approve,auto_deny,require_approval,ignore"`
	Enabled string `query:"enabled" enum:"true,false"`
}

type pamPreviewOutput struct{ Body PAMPreview }

type pamGroupOutput struct{ Body PAMSignerGroup }

type pamGroupCreateInput struct{ Body PAMSignerGroupInput }

type pamGroupUpdateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body PAMSignerGroupUpdate
}

type pamGroupListInput struct {
	httpapi.PageQuery
	OrgID string `query:"orgId" format:"uuid"`
}

type pamConfigInput struct {
	OrgID string `query:"orgId" format:"uuid" doc:"Required unless the caller is of one organization."`
}

// PAMConfigUpdate sets an organization's PAM settings.
type PAMConfigUpdate struct {
	OrgID          string `json:"orgId,omitempty" format:"uuid" doc:"Required unless the caller is of one organization."`
	DefaultVerdict string `json:"defaultVerdict" enum:"auto_approve,auto_deny,require_approval,ignore"`
}

type pamConfigPutInput struct{ Body PAMConfigUpdate }

type pamConfigOutput struct{ Body PAMConfig }

type pamRequestListInput struct {
	httpapi.PageQuery
	Status   string `query:"status" enum:"pending,approved,denied,ignored,revoked,expired"`
	OrgID    string `query:"orgId" format:"uuid"`
	SiteID   string `query:"siteId" format:"uuid"`
	DeviceID string `query:"deviceId" format:"uuid"`
	RuleID   string `query:"ruleId" format:"uuid"`
	User     string `query:"user" maxLength:"256" doc:"The requesting user's name (any case)."`
}

type pamActiveListInput struct {
	httpapi.PageQuery
	OrgID    string `query:"orgId" format:"uuid"`
	DeviceID string `query:"deviceId" format:"uuid"`
}

type pamRequestOutput struct{ Body PAMElevationRequest }

type pamRespondInput struct {
	ID   string `path:"id" format:"uuid"`
	Body PAMRespondInput
}

// PAMRevokeInput optionally says why an elevation is revoked.
type PAMRevokeInput struct {
	Reason string `json:"reason,omitempty" maxLength:"1000"`
}

type pamRevokeInput struct {
	ID   string `path:"id" format:"uuid"`
	Body *PAMRevokeInput
}

// Register adds the /pam routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Privileged access"
	route := func(id, method, path string, perm access.Perm, summary, desc string, errors ...int) httpapi.Route {
		return httpapi.Route{ID: id, Method: method, Path: path, Tag: tag, Permission: perm, Summary: summary, Description: desc, Errors: errors}
	}
	list := func(page httpapi.PageQuery, f RequestFilter, ctx context.Context) (*httpapi.ListBody[PAMElevationRequest], error) {
		p, err := page.Normalize(httpapi.MaxPageSize)
		if err != nil {
			return nil, err
		}
		rows, next, total, err := s.ListRequests(ctx, f, p)
		if err != nil {
			return nil, err
		}
		return httpapi.ListPage(rows, next, p, total), nil
	}
	httpapi.Register(api, route("list-pam-elevation-requests", http.MethodGet, "/pam/elevation-requests", access.PAMRead,
		"List elevation requests", "Requests in scope, newest first."),
		func(ctx context.Context, in *pamRequestListInput) (*httpapi.ListBody[PAMElevationRequest], error) {
			return list(in.PageQuery, RequestFilter{Status: in.Status, OrgID: in.OrgID, SiteID: in.SiteID, DeviceID: in.DeviceID,
				RuleID: in.RuleID, User: in.User}, ctx)
		})
	httpapi.Register(api, route("list-pam-active", http.MethodGet, "/pam/active", access.PAMRead, "List active elevations",
		"Approved requests that have not expired (nor been revoked), newest first."),
		func(ctx context.Context, in *pamActiveListInput) (*httpapi.ListBody[PAMElevationRequest], error) {
			return list(in.PageQuery, RequestFilter{OrgID: in.OrgID, DeviceID: in.DeviceID, Active: true}, ctx)
		})
	httpapi.Register(api, route("respond-pam-elevation-request", http.MethodPost, "/pam/elevation-requests/{id}/respond", access.PAMApprove,
		"Approve or deny an elevation request",
		"A pending request becomes approved (active for durationMinutes) or denied, and its device is told. 409 "+CodeNotPending+
			" when it is no longer pending (another technician answered first, it timed out); 403 "+CodeSelfApproval+
			" when the caller is the requester (its email, the email's local part or its name is the request's user).",
		http.StatusNotFound, http.StatusConflict),
		func(ctx context.Context, in *pamRespondInput) (*pamRequestOutput, error) {
			r, err := s.Respond(ctx, in.ID, in.Body)
			return &pamRequestOutput{r}, err
		})
	httpapi.Register(api, route("revoke-pam-elevation-request", http.MethodPost, "/pam/elevation-requests/{id}/revoke", access.PAMApprove,
		"Revoke an active elevation", "An approved, unexpired request becomes revoked and its device drops the grant (or stops the command). 409 "+
			CodeNotActive+" when it is not active.", http.StatusNotFound, http.StatusConflict),
		func(ctx context.Context, in *pamRevokeInput) (*pamRequestOutput, error) {
			reason := ""
			if in.Body != nil {
				reason = in.Body.Reason
			}
			r, err := s.Revoke(ctx, in.ID, reason)
			return &pamRequestOutput{r}, err
		})

	httpapi.Register(api, route("list-pam-rules", http.MethodGet, "/pam/rules", access.PAMRead, "List elevation rules",
		"Rules in scope in decision order: priority, then createdAt, then id."),
		func(ctx context.Context, in *pamRuleListInput) (*httpapi.ListBody[PAMRule], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			f := RuleFilter{OrgID: in.OrgID, SiteID: in.SiteID, Verdict: in.Verdict}
			if in.Enabled != "" {
				e := in.Enabled == "true"
				f.Enabled = &e
			}
			rows, next, total, err := s.ListRules(ctx, f, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	create := route("create-pam-rule", http.MethodPost, "/pam/rules", access.PAMWrite, "Create an elevation rule", matchDoc+
		" matchSignerGroupId with matchSigner or matchSignerThumbprint is a 400.")
	create.Status = http.StatusCreated
	httpapi.Register(api, create, func(ctx context.Context, in *pamRuleCreateInput) (*pamRuleOutput, error) {
		r, err := s.CreateRule(ctx, in.Body)
		return &pamRuleOutput{r}, err
	})
	httpapi.Register(api, route("update-pam-rules", http.MethodPatch, "/pam/rules", access.PAMWrite, "Change several elevation rules",
		"Applies each item as PATCH /pam/rules/{id} would, all in one transaction: one refusal (400 naming rules[i].field, 404) changes none.",
		http.StatusNotFound),
		func(ctx context.Context, in *pamRuleBulkInput) (*pamRuleListOutput, error) {
			rules, err := s.UpdateRules(ctx, in.Body.Rules)
			return &pamRuleListOutput{PAMRuleList{Data: rules}}, err
		})
	httpapi.Register(api, route("preview-pam-rule", http.MethodPost, "/pam/rules/preview", access.PAMRead, "Preview an elevation rule",
		"Which requests of the last 30 days (the newest 1000) the draft rule would match, with the same matcher as decisions; nothing is stored."),
		func(ctx context.Context, in *pamRuleCreateInput) (*pamPreviewOutput, error) {
			p, err := s.Preview(ctx, in.Body)
			return &pamPreviewOutput{p}, err
		})
	httpapi.Register(api, route("update-pam-rule", http.MethodPatch, "/pam/rules/{id}", access.PAMWrite, "Change an elevation rule",
		"Changes the fields sent; the body carries at least one match field with a value (the rule must keep one).", http.StatusNotFound),
		func(ctx context.Context, in *pamRuleUpdateInput) (*pamRuleOutput, error) {
			r, err := s.UpdateRule(ctx, in.ID, in.Body)
			return &pamRuleOutput{r}, err
		})
	del := route("delete-pam-rule", http.MethodDelete, "/pam/rules/{id}", access.PAMWrite, "Delete an elevation rule", "", http.StatusNotFound)
	del.Status = http.StatusNoContent
	httpapi.Register(api, del, func(ctx context.Context, in *pamIDPath) (*struct{}, error) {
		return nil, s.DeleteRule(ctx, in.ID)
	})

	httpapi.Register(api, route("list-pam-signer-groups", http.MethodGet, "/pam/signer-groups", access.PAMRead, "List signer groups",
		"Newest first."),
		func(ctx context.Context, in *pamGroupListInput) (*httpapi.ListBody[PAMSignerGroup], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListGroups(ctx, in.OrgID, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	gcreate := route("create-pam-signer-group", http.MethodPost, "/pam/signer-groups", access.PAMWrite, "Create a signer group", "")
	gcreate.Status = http.StatusCreated
	httpapi.Register(api, gcreate, func(ctx context.Context, in *pamGroupCreateInput) (*pamGroupOutput, error) {
		g, err := s.CreateGroup(ctx, in.Body)
		return &pamGroupOutput{g}, err
	})
	httpapi.Register(api, route("update-pam-signer-group", http.MethodPatch, "/pam/signer-groups/{id}", access.PAMWrite, "Change a signer group",
		"Lists sent replace the group's; rules using it decide with the change at once.", http.StatusNotFound),
		func(ctx context.Context, in *pamGroupUpdateInput) (*pamGroupOutput, error) {
			g, err := s.UpdateGroup(ctx, in.ID, in.Body)
			return &pamGroupOutput{g}, err
		})
	gdel := route("delete-pam-signer-group", http.MethodDelete, "/pam/signer-groups/{id}", access.PAMWrite, "Delete a signer group",
		"409 "+CodeSignerGroupInUse+" while a rule references it.", http.StatusNotFound, http.StatusConflict)
	gdel.Status = http.StatusNoContent
	httpapi.Register(api, gdel, func(ctx context.Context, in *pamIDPath) (*struct{}, error) {
		return nil, s.DeleteGroup(ctx, in.ID)
	})

	httpapi.Register(api, route("get-pam-config", http.MethodGet, "/pam/config", access.PAMRead, "Get an organization's PAM settings",
		"The default verdict of requests no rule matches (require_approval until set).", http.StatusNotFound),
		func(ctx context.Context, in *pamConfigInput) (*pamConfigOutput, error) {
			c, err := s.GetConfig(ctx, in.OrgID)
			return &pamConfigOutput{c}, err
		})
	httpapi.Register(api, route("put-pam-config", http.MethodPut, "/pam/config", access.PAMWrite, "Set an organization's PAM settings", "",
		http.StatusNotFound),
		func(ctx context.Context, in *pamConfigPutInput) (*pamConfigOutput, error) {
			c, err := s.PutConfig(ctx, in.Body.OrgID, in.Body.DefaultVerdict)
			return &pamConfigOutput{c}, err
		})
}
