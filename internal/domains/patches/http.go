package patches

import (
	"context"
	"io"
	"net/http"
	"strconv"

	"gale/internal/platform/access"
	"gale/internal/platform/httpapi"

	"github.com/danielgtaylor/huma/v2"
)

type patchIDPath struct {
	ID string `path:"id" format:"uuid"`
}

type patchDataOutput[T any] struct {
	Body struct {
		Data []T `json:"data"`
	}
}

type patchListInput struct {
	httpapi.PageQuery
	Source   string `query:"source" enum:"os_vendor_a,os_vendor_b,linux,third_party,custom"`
	Severity string `query:"severity" enum:"critical,important,moderate,low,unknown"`
	Category string `query:"category" enum:"security,bugfix,feature,other"`
	Status   string `query:"status" enum:"pending,approved,declined,deferred" doc:"The approval state (with orgId: the one that applies to that organization)."`
	Search   string `query:"search" maxLength:"200" doc:"Matches title or package."`
	OrgID    string `query:"orgId" format:"uuid" doc:"Patches offered to this organization's devices."`
	DeviceID string `query:"deviceId" format:"uuid" doc:"Patches offered to this device."`
}

type patchOutput struct{ Body Patch }

type patchScanInput struct{ Body PatchScanRequest }

type patchJobStartOutput struct{ Body PatchJobStart }

type patchDecisionInput struct {
	ID   string         `path:"id" format:"uuid"`
	Body *PatchDecision `required:"false"`
}

type patchDeferInput struct {
	ID   string `path:"id" format:"uuid"`
	Body PatchDeferral
}

type patchApprovalOutput struct{ Body PatchApproval }

type patchBulkApproveInput struct{ Body PatchBulkApproval }

type patchApprovalsInput struct {
	httpapi.PageQuery
	Status  string `query:"status" enum:"approved,declined,deferred"`
	OrgID   string `query:"orgId" format:"uuid"`
	PatchID string `query:"patchId" format:"uuid"`
}

type patchJobsInput struct {
	httpapi.PageQuery
	Kind   string `query:"kind" enum:"scan,install,rollback"`
	Status string `query:"status" enum:"running,completed,failed"`
}

type patchJobOutput struct{ Body PatchJobDetail }

type patchRollbackInput struct {
	ID   string `path:"id" format:"uuid"`
	Body PatchRollbackRequest
}

type patchComplianceInput struct {
	OrgID  string `query:"orgId" format:"uuid"`
	SiteID string `query:"siteId" format:"uuid"`
}

type patchComplianceOutput struct{ Body PatchCompliance }

type patchReportInput struct{ Body PatchReportRequest }

type patchReportOutput struct{ Body PatchReport }

type patchReportsInput struct {
	httpapi.PageQuery
}

// Register adds the /patches routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Patches"
	httpapi.Register(api, httpapi.Route{ID: "list-patches", Method: http.MethodGet, Path: "/patches", Tag: tag, Permission: access.PatchesRead,
		Summary: "List patches", Description: "The partner's patches, newest first, each with source and its approval state."},
		func(ctx context.Context, in *patchListInput) (*httpapi.ListBody[Patch], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListPatches(ctx, PatchFilter{Source: in.Source, Severity: in.Severity, Category: in.Category,
				Status: in.Status, Search: in.Search, OrgID: in.OrgID, DeviceID: in.DeviceID}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "scan-patches", Method: http.MethodPost, Path: "/patches/scan", Tag: tag,
		Permission: access.PatchesExecute, Status: http.StatusAccepted, MaxBodyBytes: 1 << 20, Summary: "Scan devices for patches",
		Description: "A scan job: one patch_scan command per Linux device (1 to 10000); devices that get none are in skipped with a reason."},
		func(ctx context.Context, in *patchScanInput) (*patchJobStartOutput, error) {
			out, err := s.Scan(ctx, in.Body)
			return &patchJobStartOutput{out}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-patch-sources", Method: http.MethodGet, Path: "/patches/sources", Tag: tag,
		Permission: access.PatchesRead, Summary: "Patch sources with counts"},
		func(ctx context.Context, _ *struct{}) (*patchDataOutput[PatchSourceCount], error) {
			rows, err := s.SourcesWithCounts(ctx)
			out := &patchDataOutput[PatchSourceCount]{}
			out.Body.Data = rows
			return out, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-patch-approvals", Method: http.MethodGet, Path: "/patches/approvals", Tag: tag,
		Permission: access.PatchesRead, Summary: "List patch decisions", Description: "Approvals, declines and deferrals, newest first."},
		func(ctx context.Context, in *patchApprovalsInput) (*httpapi.ListBody[PatchApproval], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListApprovals(ctx, ApprovalFilter{Status: in.Status, OrgID: in.OrgID, PatchID: in.PatchID}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "bulk-approve-patches", Method: http.MethodPost, Path: "/patches/bulk-approve", Tag: tag,
		Permission: access.PatchesApprove, Summary: "Approve patches", Description: "1 to 500 patches, each reported: approved, or an error (NOT_FOUND, APPROVAL_CONFLICT)."},
		func(ctx context.Context, in *patchBulkApproveInput) (*patchDataOutput[PatchBulkApprovalItem], error) {
			rows, err := s.BulkApprove(ctx, in.Body)
			out := &patchDataOutput[PatchBulkApprovalItem]{}
			out.Body.Data = rows
			return out, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-patch-jobs", Method: http.MethodGet, Path: "/patches/jobs", Tag: tag,
		Permission: access.PatchesRead, Summary: "List patch jobs", Description: "Scans, installs and rollbacks, newest first, with totals per state."},
		func(ctx context.Context, in *patchJobsInput) (*httpapi.ListBody[PatchJob], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListJobs(ctx, JobFilter{Kind: in.Kind, Status: in.Status}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "get-patch-job", Method: http.MethodGet, Path: "/patches/jobs/{id}", Tag: tag,
		Permission: access.PatchesRead, Summary: "Get a patch job", Description: "With its devices; not a route of the specification.",
		Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *patchIDPath) (*patchJobOutput, error) {
			j, err := s.GetJob(ctx, in.ID)
			return &patchJobOutput{j}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-patch-compliance", Method: http.MethodGet, Path: "/patches/compliance", Tag: tag,
		Permission: access.PatchesRead, Summary: "Patch compliance",
		Description: "Of the live devices in scope (of an organization, a site): compliancePercent = installed / (installed + pending) * 100, 100 when both are 0."},
		func(ctx context.Context, in *patchComplianceInput) (*patchComplianceOutput, error) {
			c, err := s.Compliance(ctx, in.OrgID, in.SiteID)
			return &patchComplianceOutput{c}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-patch-compliance-reports", Method: http.MethodGet, Path: "/patches/compliance/report", Tag: tag,
		Permission: access.PatchesRead, Summary: "List compliance reports", Description: "Newest first; POST queues one."},
		func(ctx context.Context, in *patchReportsInput) (*httpapi.ListBody[PatchReport], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListReports(ctx, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "queue-patch-compliance-report", Method: http.MethodPost, Path: "/patches/compliance/report", Tag: tag,
		Permission: access.PatchesRead, Status: http.StatusAccepted, Summary: "Queue a compliance report",
		Description: "CSV or PDF, one row per device; built in the background (status queued, running, completed or failed; progress counts rows)."},
		func(ctx context.Context, in *patchReportInput) (*patchReportOutput, error) {
			r, err := s.QueueReport(ctx, in.Body)
			return &patchReportOutput{r}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-patch-compliance-report", Method: http.MethodGet, Path: "/patches/compliance/report/{id}", Tag: tag,
		Permission: access.PatchesRead, Summary: "Get a compliance report", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *patchIDPath) (*patchReportOutput, error) {
			r, err := s.GetReport(ctx, in.ID)
			return &patchReportOutput{r}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "download-patch-compliance-report", Method: http.MethodGet, Path: "/patches/compliance/report/{id}/download",
		Tag: tag, Permission: access.PatchesRead, Summary: "Download a compliance report",
		Description: "The file (text/csv or application/pdf) as an attachment; 409 REPORT_NOT_READY before the report is completed.",
		Errors:      []int{http.StatusNotFound, http.StatusConflict}},
		func(ctx context.Context, in *patchIDPath) (*huma.StreamResponse, error) {
			r, rc, err := s.ReportFile(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			return &huma.StreamResponse{Body: func(hctx huma.Context) {
				defer rc.Close()
				contentType := "text/csv; charset=utf-8"
				if r.Format == FormatPDF {
					contentType = "application/pdf"
				}
				hctx.SetHeader("Content-Type", contentType)
				hctx.SetHeader("Content-Disposition", `attachment; filename="patch-compliance-`+r.ID+`.`+r.Format+`"`)
				if r.SizeBytes != nil {
					hctx.SetHeader("Content-Length", strconv.FormatInt(*r.SizeBytes, 10))
				}
				hctx.SetStatus(http.StatusOK)
				if _, err := io.Copy(hctx.BodyWriter(), rc); err != nil {
					s.logger.ErrorContext(ctx, "patch report download failed", "reportId", r.ID, "error", err)
				}
			}}, nil
		})
	httpapi.Register(api, httpapi.Route{ID: "rollback-patch", Method: http.MethodPost, Path: "/patches/{id}/rollback", Tag: tag,
		Permission: access.PatchesExecute, Status: http.StatusAccepted, Summary: "Roll a patch back on devices",
		Description: "A rollback job: each device (1 to 500) where the patch is installed goes back to the version its install replaced; " +
			"devices where it is not installed or no previous version was recorded are in skipped.",
		Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *patchRollbackInput) (*patchJobStartOutput, error) {
			out, err := s.Rollback(ctx, in.ID, in.Body)
			return &patchJobStartOutput{out}, err
		})
	decision := func(status string) func(ctx context.Context, in *patchDecisionInput) (*patchApprovalOutput, error) {
		return func(ctx context.Context, in *patchDecisionInput) (*patchApprovalOutput, error) {
			var d PatchDecision
			if in.Body != nil {
				d = *in.Body
			}
			ap, err := s.Decide(ctx, in.ID, status, d.Note, d.OrgID, nil)
			return &patchApprovalOutput{ap}, err
		}
	}
	const decisionDoc = "For the partner, or one organization (orgId; its decision wins over the partner's). From pending or deferred; " +
		"the same decision again changes nothing; the other decision is 409 APPROVAL_CONFLICT."
	httpapi.Register(api, httpapi.Route{ID: "approve-patch", Method: http.MethodPost, Path: "/patches/{id}/approve", Tag: tag,
		Permission: access.PatchesApprove, Summary: "Approve a patch", Description: decisionDoc, Errors: []int{http.StatusNotFound, http.StatusConflict}},
		decision(ApprovalApproved))
	httpapi.Register(api, httpapi.Route{ID: "decline-patch", Method: http.MethodPost, Path: "/patches/{id}/decline", Tag: tag,
		Permission: access.PatchesApprove, Summary: "Decline a patch", Description: decisionDoc, Errors: []int{http.StatusNotFound, http.StatusConflict}},
		decision(ApprovalDeclined))
	httpapi.Register(api, httpapi.Route{ID: "defer-patch", Method: http.MethodPost, Path: "/patches/{id}/defer", Tag: tag,
		Permission: access.PatchesApprove, Summary: "Defer a patch", Description: "Until a future date-time, from pending or deferred; " +
			"the patch is pending again from then. 409 APPROVAL_CONFLICT once approved or declined.",
		Errors: []int{http.StatusNotFound, http.StatusConflict}},
		func(ctx context.Context, in *patchDeferInput) (*patchApprovalOutput, error) {
			until := in.Body.Until
			ap, err := s.Decide(ctx, in.ID, ApprovalDeferred, in.Body.Note, in.Body.OrgID, &until)
			return &patchApprovalOutput{ap}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-patch", Method: http.MethodGet, Path: "/patches/{id}", Tag: tag, Permission: access.PatchesRead,
		Summary: "Get a patch", Description: "With deviceCounts: the devices in scope by the patch's state on them.", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *patchIDPath) (*patchOutput, error) {
			p, err := s.GetPatch(ctx, in.ID)
			return &patchOutput{p}, err
		})
}
