package configpolicies

import (
	"context"
	"net/http"

	"gale/internal/platform/access"
	"gale/internal/platform/httpapi"
)

type policyIDPath struct {
	ID string `path:"id" format:"uuid"`
}

type policyListInput struct {
	httpapi.PageQuery
	OrgID       string `query:"orgId" format:"uuid" doc:"Only the policies of this organization."`
	Status      string `query:"status" enum:"active,inactive"`
	Enabled     string `query:"enabled" enum:"true,false" doc:"true: status active; false: inactive."`
	Enforcement string `query:"enforcement" enum:"monitor,warn,enforce"`
	Q           string `query:"q" maxLength:"255" doc:"Words in the name or description."`
}

func (in policyListInput) filter() ListFilter {
	f := ListFilter{OrgID: in.OrgID, Status: in.Status, Enforcement: in.Enforcement, Query: in.Q}
	switch in.Enabled {
	case "true":
		f.Status = StatusActive
	case "false":
		f.Status = StatusInactive
	}
	return f
}

type policyOutput struct{ Body Policy }

type policyCreateInput struct{ Body PolicyInput }

type policyReplaceInput struct {
	ID   string `path:"id" format:"uuid"`
	Body PolicyInput
}

type policyPatchInput struct {
	ID   string `path:"id" format:"uuid"`
	Body PolicyPatch
}

type policyStatsInput struct {
	OrgID string `query:"orgId" format:"uuid" doc:"Only the policies of this organization."`
}

type policyStatsOutput struct{ Body PolicyComplianceStats }

type policyDevicePath struct {
	DeviceID string `path:"deviceId" format:"uuid"`
}

type policyDeviceOutput struct{ Body PolicyDeviceReport }

type policyComplianceInput struct {
	httpapi.PageQuery
	ID    string `path:"id" format:"uuid"`
	State string `query:"state" enum:"compliant,non_compliant,pending,error"`
}

type policyEvaluationOutput struct{ Body PolicyEvaluation }

type policyRemediationOutput struct{ Body PolicyRemediation }

// Register adds the /policies routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Policies"
	notFound := []int{http.StatusNotFound}
	httpapi.Register(api, httpapi.Route{ID: "list-policies", Method: http.MethodGet, Path: "/policies", Tag: tag,
		Permission: access.ConfigurationRead, Summary: "List configuration policies", Description: "Policies in scope, newest first."},
		func(ctx context.Context, in *policyListInput) (*httpapi.ListBody[Policy], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.List(ctx, in.filter(), page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "get-policy-compliance-stats", Method: http.MethodGet, Path: "/policies/compliance/stats", Tag: tag,
		Permission: access.ConfigurationRead, Summary: "Compliance counts across policies",
		Description: "Across the active policies in scope: devices by their worst state, policy and device pairs by state; and policies by status and overall state."},
		func(ctx context.Context, in *policyStatsInput) (*policyStatsOutput, error) {
			x, err := s.Stats(ctx, in.OrgID)
			return &policyStatsOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-policy-compliance-summary", Method: http.MethodGet, Path: "/policies/compliance/summary",
		Tag: tag, Permission: access.ConfigurationRead, Summary: "Compliance per policy",
		Description: "The policies in scope (filtered as the policy list) with their devices counted by state and the compliant percentage."},
		func(ctx context.Context, in *policyListInput) (*httpapi.ListBody[PolicyComplianceSummary], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.Summary(ctx, in.filter(), page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "get-device-policy-compliance", Method: http.MethodGet, Path: "/policies/compliance/device/{deviceId}",
		Tag: tag, Permission: access.ConfigurationRead, Summary: "A device's compliance",
		Description: "Every policy assigned to the device, with its state and per-rule results. Another tenant's or an unknown device: 404.",
		Errors:      notFound},
		func(ctx context.Context, in *policyDevicePath) (*policyDeviceOutput, error) {
			x, err := s.DeviceReport(ctx, in.DeviceID)
			return &policyDeviceOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-policy", Method: http.MethodGet, Path: "/policies/{id}", Tag: tag,
		Permission: access.ConfigurationRead, Summary: "Get a policy", Errors: notFound},
		func(ctx context.Context, in *policyIDPath) (*policyOutput, error) {
			x, err := s.Get(ctx, in.ID)
			return &policyOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "create-policy", Method: http.MethodPost, Path: "/policies", Tag: tag,
		Permission: access.ConfigurationWrite, Status: http.StatusCreated, Summary: "Create a policy",
		Description: "1 to 50 rules, targets, enforcement (monitor, warn, enforce) and an optional remediation script. An active policy is evaluated on its devices at once. A name another policy of the scope holds: 409 POLICY_NAME_TAKEN. See the API notes.",
		Errors:      []int{http.StatusConflict}},
		func(ctx context.Context, in *policyCreateInput) (*policyOutput, error) {
			x, err := s.Create(ctx, in.Body)
			return &policyOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "replace-policy", Method: http.MethodPut, Path: "/policies/{id}", Tag: tag,
		Permission: access.ConfigurationWrite, Summary: "Replace a policy",
		Description: "Every field as given; absent optional fields take their defaults. The organization does not change.",
		Errors:      []int{http.StatusNotFound, http.StatusConflict}},
		func(ctx context.Context, in *policyReplaceInput) (*policyOutput, error) {
			x, err := s.Replace(ctx, in.ID, in.Body)
			return &policyOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-policy", Method: http.MethodPatch, Path: "/policies/{id}", Tag: tag,
		Permission: access.ConfigurationWrite, Summary: "Update a policy", Description: "The fields given; the others stay.",
		Errors: []int{http.StatusNotFound, http.StatusConflict}},
		func(ctx context.Context, in *policyPatchInput) (*policyOutput, error) {
			x, err := s.Patch(ctx, in.ID, in.Body)
			return &policyOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-policy", Method: http.MethodDelete, Path: "/policies/{id}", Tag: tag,
		Permission: access.ConfigurationWrite, Status: http.StatusNoContent, Summary: "Delete a policy",
		Description: "The policy, its assignments and its devices' compliance.", Errors: notFound},
		func(ctx context.Context, in *policyIDPath) (*struct{}, error) {
			return nil, s.Delete(ctx, in.ID)
		})
	for _, st := range []struct{ id, path, status, code, summary string }{
		{"activate-policy", "/policies/{id}/activate", StatusActive, "POLICY_ALREADY_ACTIVE", "Activate a policy"},
		{"deactivate-policy", "/policies/{id}/deactivate", StatusInactive, "POLICY_ALREADY_INACTIVE", "Deactivate a policy"},
	} {
		status := st.status
		httpapi.Register(api, httpapi.Route{ID: st.id, Method: http.MethodPost, Path: st.path, Tag: tag, Permission: access.ConfigurationWrite,
			Summary: st.summary, Description: "A policy already " + status + ", or made so by a concurrent caller first: 409 " + st.code + ".",
			Errors: []int{http.StatusNotFound, http.StatusConflict}},
			func(ctx context.Context, in *policyIDPath) (*policyOutput, error) {
				x, err := s.SetStatus(ctx, in.ID, status)
				return &policyOutput{x}, err
			})
	}
	httpapi.Register(api, httpapi.Route{ID: "evaluate-policy", Method: http.MethodPost, Path: "/policies/{id}/evaluate", Tag: tag,
		Permission: access.ConfigurationWrite, Status: http.StatusAccepted, Summary: "Evaluate a policy now",
		Description: "Queues a policy_evaluate command to every assigned device without one outstanding; the schedule restarts from now. An inactive policy: 409 POLICY_INACTIVE.",
		Errors:      []int{http.StatusNotFound, http.StatusConflict}},
		func(ctx context.Context, in *policyIDPath) (*policyEvaluationOutput, error) {
			x, err := s.Evaluate(ctx, in.ID)
			return &policyEvaluationOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "remediate-policy", Method: http.MethodPost, Path: "/policies/{id}/remediate", Tag: tag,
		Permission: access.ConfigurationWrite, Status: http.StatusAccepted, Summary: "Remediate the non-compliant devices",
		Description: "Runs the remediation script, as the caller (who also needs scripts:execute), on every non-compliant device; each is evaluated again once its script ended. Without a remediation script: 400 NO_REMEDIATION.",
		Errors:      notFound},
		func(ctx context.Context, in *policyIDPath) (*policyRemediationOutput, error) {
			x, err := s.Remediate(ctx, in.ID)
			return &policyRemediationOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-policy-compliance", Method: http.MethodGet, Path: "/policies/{id}/compliance", Tag: tag,
		Permission: access.ConfigurationRead, Summary: "A policy's devices and their compliance",
		Description: "One row per assigned device (in scope), by device ID.", Errors: notFound},
		func(ctx context.Context, in *policyComplianceInput) (*httpapi.ListBody[PolicyDeviceCompliance], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListCompliance(ctx, in.ID, in.State, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
}
