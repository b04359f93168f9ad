package vulnerabilities

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
)

type vulnListInput struct {
	httpapi.PageQuery
	OrgID    string `query:"orgId" format:"uuid"`
	Severity string `query:"severity" enum:"critical,high,medium,low,unknown"`
}

type vulnSoftwareInput struct {
	httpapi.PageQuery
	OrgID    string `query:"orgId" format:"uuid"`
	Severity string `query:"severity" enum:"critical,high,medium,low,unknown"`
	Status   string `query:"status" enum:"open,accepted,mitigated,patched" doc:"The findings counted; default open."`
}

type vulnGroupInput struct {
	GroupKey string `path:"groupKey" maxLength:"300" doc:"pkg:<package> or os:linux-kernel."`
	OrgID    string `query:"orgId" format:"uuid"`
	Status   string `query:"status" enum:"open,accepted,mitigated,patched" doc:"The findings shown; default open."`
}

type vulnGroupOutput struct{ Body VulnSoftwareDetail }

type vulnStatsInput struct {
	OrgID string `query:"orgId" format:"uuid"`
}

type vulnStatsOutput struct{ Body VulnStats }

type vulnCVEDevicesInput struct {
	httpapi.PageQuery
	CVEID  string `path:"cveId" maxLength:"40" doc:"A CVE identifier (CVE-2026-1234)."`
	Status string `query:"status" enum:"open,accepted,mitigated,patched" doc:"Default: every status but patched."`
}

type vulnFindingOutput struct{ Body VulnFinding }

type vulnAcceptInput struct {
	ID   string `path:"id" format:"uuid" doc:"A finding ID."`
	Body *VulnAcceptRisk
}

type vulnMitigateInput struct {
	ID   string `path:"id" format:"uuid" doc:"A finding ID."`
	Body *VulnMitigate
}

type vulnIDInput struct {
	ID string `path:"id" format:"uuid" doc:"A finding ID."`
}

type vulnBulkAcceptInput struct{ Body VulnBulkAcceptRisk }
type vulnBulkMitigateInput struct{ Body VulnBulkMitigate }
type vulnBulkOutput struct{ Body VulnBulkResult }

type vulnRemediateInput struct{ Body VulnRemediate }
type vulnRemediateOutput struct{ Body VulnRemediation }

type vulnTicketInput struct{ Body VulnTicketRequest }

type vulnImportInput struct {
	Format  string `query:"format" enum:"osv,debian_tracker" doc:"Default: guessed (an array, or an object with id and affected, is OSV)."`
	Release string `query:"release" maxLength:"40" doc:"debian_tracker: the release whose status and fixed_version to take (e.g. bookworm); required."`
	Body    *VulnImportBody
}

// VulnImportBody is the JSON form of an import (the raw form sends the document itself).
type VulnImportBody struct {
	Format   string          `json:"format,omitempty" maxLength:"20" doc:"osv or debian_tracker; default: guessed."`
	Release  string          `json:"release,omitempty" maxLength:"40" doc:"debian_tracker: the release to take."`
	Document json.RawMessage `json:"document" doc:"The OSV object or array, or the Debian Security Tracker JSON."`
}

type vulnImportOutput struct{ Body VulnImportResult }

// Register adds the /vulnerabilities routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Vulnerabilities"
	route := func(id, method, path string, perm access.Perm, summary, desc string, errors ...int) httpapi.Route {
		return httpapi.Route{ID: id, Method: method, Path: path, Tag: tag, Permission: perm, Summary: summary, Description: desc, Errors: errors}
	}
	httpapi.Register(api, route("list-vulnerabilities", http.MethodGet, "/vulnerabilities", access.VulnerabilitiesRead, "List vulnerabilities by CVE",
		"Open findings in scope, one row per CVE, worst first: severity, known exploited, CVSS score, then CVE ID."),
		func(ctx context.Context, in *vulnListInput) (*httpapi.ListBody[VulnCVE], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.List(ctx, ListFilter{OrgID: in.OrgID, Severity: in.Severity}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, route("list-vulnerable-software", http.MethodGet, "/vulnerabilities/software", access.VulnerabilitiesRead,
		"List vulnerabilities by software", "Findings in scope grouped by remediation unit (groupKey), riskiest first (riskScore, then groupKey)."),
		func(ctx context.Context, in *vulnSoftwareInput) (*httpapi.ListBody[VulnSoftwareGroup], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.Software(ctx, ListFilter{OrgID: in.OrgID, Severity: in.Severity, Status: in.Status}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, route("get-vulnerable-software", http.MethodGet, "/vulnerabilities/software/{groupKey}", access.VulnerabilitiesRead,
		"Get a remediation unit", "The group's counts and its devices (at most 500) with their findings; 404 when it has none in scope.", http.StatusNotFound),
		func(ctx context.Context, in *vulnGroupInput) (*vulnGroupOutput, error) {
			d, err := s.SoftwareGroup(ctx, in.GroupKey, ListFilter{OrgID: in.OrgID, Status: in.Status})
			return &vulnGroupOutput{d}, err
		})
	httpapi.Register(api, route("get-vulnerability-stats", http.MethodGet, "/vulnerabilities/stats", access.VulnerabilitiesRead,
		"Vulnerability counts", "Critical open findings, known-exploited exposure, findings a pending patch fixes, acceptances ending within 7 days."),
		func(ctx context.Context, in *vulnStatsInput) (*vulnStatsOutput, error) {
			st, err := s.Stats(ctx, in.OrgID)
			return &vulnStatsOutput{st}, err
		})
	httpapi.Register(api, route("list-vulnerability-devices", http.MethodGet, "/vulnerabilities/{cveId}/devices", access.VulnerabilitiesRead,
		"List the devices a CVE affects", "The CVE's findings in scope (one per device and package); 404 when the CVE has none in scope.", http.StatusNotFound),
		func(ctx context.Context, in *vulnCVEDevicesInput) (*httpapi.ListBody[VulnFinding], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.CVEDevices(ctx, in.CVEID, in.Status, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	rem := route("remediate-vulnerabilities", http.MethodPost, "/vulnerabilities/remediate", access.DevicesExecute, "Remediate vulnerabilities",
		"Schedules, as one patch install job of the patching domain, the pending patches that reach the fixed version of the findings "+
			"selected (by finding, CVE or group: 1 to 200 selectors) on each affected device. Only approved patches install (approve: true "+
			"approves those still undecided). 404 when no finding in scope is selected; 409 "+CodeNoPatch+" when no pending patch fixes them.",
		http.StatusNotFound, http.StatusConflict)
	rem.MFA = true
	httpapi.Register(api, rem, func(ctx context.Context, in *vulnRemediateInput) (*vulnRemediateOutput, error) {
		r, err := s.Remediate(ctx, in.Body)
		return &vulnRemediateOutput{r}, err
	})
	httpapi.Register(api, route("bulk-accept-vulnerability-risk", http.MethodPost, "/vulnerabilities/bulk/accept-risk", access.VulnerabilitiesAcceptRisk,
		"Accept the risk of findings", "Each open finding named (1 to 200) becomes accepted; the others are skipped with their reason."),
		func(ctx context.Context, in *vulnBulkAcceptInput) (*vulnBulkOutput, error) {
			r, err := s.BulkAcceptRisk(ctx, in.Body)
			return &vulnBulkOutput{r}, err
		})
	httpapi.Register(api, route("bulk-mitigate-vulnerabilities", http.MethodPost, "/vulnerabilities/bulk/mitigate", access.DevicesWrite,
		"Record a mitigation of findings", "Each open finding named (1 to 200) becomes mitigated; the others are skipped with their reason."),
		func(ctx context.Context, in *vulnBulkMitigateInput) (*vulnBulkOutput, error) {
			r, err := s.BulkMitigate(ctx, in.Body)
			return &vulnBulkOutput{r}, err
		})
	tickets := route("create-vulnerability-tickets", http.MethodPost, "/vulnerabilities/tickets", access.VulnerabilitiesWrite,
		"Open tickets for findings", "Not available yet: the helpdesk tickets domain does not exist. After validating the body (and that the "+
			"findings exist in scope: 404), answers 501 "+CodeTicketsUnavailable+".", http.StatusNotFound, http.StatusNotImplemented)
	httpapi.Register(api, tickets, func(ctx context.Context, in *vulnTicketInput) (*struct{}, error) {
		if err := s.OpenTickets(ctx, in.Body); err != nil {
			return nil, err
		}
		return nil, apperr.NotImplemented(CodeTicketsUnavailable, "tickets are not available yet: the helpdesk tickets domain does not exist on this server")
	})
	httpapi.Register(api, route("accept-vulnerability-risk", http.MethodPost, "/vulnerabilities/{id}/accept-risk", access.VulnerabilitiesAcceptRisk,
		"Accept the risk of a finding", "open → accepted, until acceptedUntil (a future time: 400 otherwise) when it reopens by itself. "+
			"409 "+CodeStatusConflict+" when the finding is not open (another caller may have moved it first).", http.StatusNotFound, http.StatusConflict),
		func(ctx context.Context, in *vulnAcceptInput) (*vulnFindingOutput, error) {
			var body VulnAcceptRisk
			if in.Body != nil {
				body = *in.Body
			}
			f, err := s.AcceptRisk(ctx, in.ID, body)
			return &vulnFindingOutput{f}, err
		})
	httpapi.Register(api, route("mitigate-vulnerability", http.MethodPost, "/vulnerabilities/{id}/mitigate", access.DevicesWrite,
		"Record a mitigation of a finding", "open → mitigated; 409 "+CodeStatusConflict+" when the finding is not open.", http.StatusNotFound, http.StatusConflict),
		func(ctx context.Context, in *vulnMitigateInput) (*vulnFindingOutput, error) {
			var body VulnMitigate
			if in.Body != nil {
				body = *in.Body
			}
			f, err := s.Mitigate(ctx, in.ID, body)
			return &vulnFindingOutput{f}, err
		})
	httpapi.Register(api, route("reopen-vulnerability", http.MethodPost, "/vulnerabilities/{id}/reopen", access.VulnerabilitiesWrite,
		"Reopen a finding", "accepted or mitigated → open; 409 "+CodeStatusConflict+" otherwise.", http.StatusNotFound, http.StatusConflict),
		func(ctx context.Context, in *vulnIDInput) (*vulnFindingOutput, error) {
			f, err := s.Reopen(ctx, in.ID)
			return &vulnFindingOutput{f}, err
		})
	imp := route("import-vulnerability-advisories", http.MethodPost, "/vulnerabilities/advisories/import", access.VulnerabilitiesWrite,
		"Import advisories", "Platform administrators (system scope; 403 otherwise). The raw body (application/octet-stream, up to 256 MB; or the JSON {format, release, document}) is an "+
			"OSV document (one object or an array) or a Debian Security Tracker JSON (package → CVE → releases). Advisories are global; "+
			"the devices having the packages named are correlated again before the answer.", http.StatusRequestEntityTooLarge)
	imp.RawBodyBytes = maxImportBytes
	httpapi.Register(api, imp, func(ctx context.Context, in *vulnImportInput) (*vulnImportOutput, error) {
		raw, ok := httpapi.RawBodyFrom(ctx)
		if !ok {
			if in.Body == nil || len(in.Body.Document) == 0 {
				return nil, apperr.Invalid("document", "send {document} as JSON, or the document itself as application/octet-stream")
			}
			r, err := s.Import(ctx, bytes.NewReader(in.Body.Document), firstNonEmpty(in.Body.Format, in.Format), firstNonEmpty(in.Body.Release, in.Release))
			return &vulnImportOutput{r}, err
		}
		r, err := s.Import(ctx, raw.Reader, in.Format, in.Release)
		return &vulnImportOutput{r}, err
	})
}
