package patches

import (
	"context"
	"net/http"

	"gale/internal/platform/access"
	"gale/internal/platform/httpapi"
)

type patchPolicyListInput struct {
	httpapi.PageQuery
	OrgID   string `query:"orgId" format:"uuid" doc:"Policies of this organization."`
	Enabled string `query:"enabled" enum:"true,false"`
}

type patchPolicyIDPath struct {
	ID string `path:"id" format:"uuid"`
}

type patchPolicyCreateInput struct{ Body PatchPolicyInput }

type patchPolicyUpdateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body PatchPolicyUpdate
}

type patchPolicyOutput struct{ Body PatchPolicy }

// Register adds the /patch-policies routes.
func (p *Policies) Register(api *httpapi.Server) {
	const tag = "Patch policies"
	httpapi.Register(api, httpapi.Route{ID: "list-patch-policies", Method: http.MethodGet, Path: "/patch-policies", Tag: tag,
		Permission: access.PatchesRead, Summary: "List patch policies", Description: "Newest first; partner-wide ones for callers reaching the whole partner."},
		func(ctx context.Context, in *patchPolicyListInput) (*httpapi.ListBody[PatchPolicy], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			f := PolicyFilter{OrgID: in.OrgID}
			if in.Enabled != "" {
				on := in.Enabled == "true"
				f.Enabled = &on
			}
			rows, next, total, err := p.List(ctx, f, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-patch-policy", Method: http.MethodPost, Path: "/patch-policies", Tag: tag,
		Permission: access.PatchesApprove, Status: http.StatusCreated, Summary: "Create a patch policy",
		Description: "Automatic approval by category and severity, deferral, deadline, reboot behaviour, a schedule or a maintenance window, " +
			"targets and rings. A name is unique in its scope (409 PATCH_POLICY_NAME_TAKEN).",
		Errors: []int{http.StatusConflict}},
		func(ctx context.Context, in *patchPolicyCreateInput) (*patchPolicyOutput, error) {
			x, err := p.Create(ctx, in.Body)
			return &patchPolicyOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-patch-policy", Method: http.MethodGet, Path: "/patch-policies/{id}", Tag: tag,
		Permission: access.PatchesRead, Summary: "Get a patch policy", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *patchPolicyIDPath) (*patchPolicyOutput, error) {
			x, err := p.Get(ctx, in.ID)
			return &patchPolicyOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-patch-policy", Method: http.MethodPatch, Path: "/patch-policies/{id}", Tag: tag,
		Permission: access.PatchesApprove, Summary: "Change a patch policy",
		Description: "Absent fields stay; a schedule replaces a maintenance window and the other way round; deadlineDays -1 removes the deadline.",
		Errors:      []int{http.StatusNotFound, http.StatusConflict}},
		func(ctx context.Context, in *patchPolicyUpdateInput) (*patchPolicyOutput, error) {
			x, err := p.Update(ctx, in.ID, in.Body)
			return &patchPolicyOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-patch-policy", Method: http.MethodDelete, Path: "/patch-policies/{id}", Tag: tag,
		Permission: access.PatchesApprove, Status: http.StatusNoContent, Summary: "Delete a patch policy",
		Description: "The jobs it started stay.", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *patchPolicyIDPath) (*struct{}, error) { return nil, p.Delete(ctx, in.ID) })
}
