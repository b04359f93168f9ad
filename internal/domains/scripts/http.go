package scripts

import (
	"context"
	"net/http"
	"strings"

	"gale/internal/platform/access"
	"gale/internal/platform/httpapi"
)

type idPath struct {
	ID string `path:"id" format:"uuid"`
}

type dataOutput[T any] struct {
	Body struct {
		Data []T `json:"data"`
	}
}

func data[T any](rows []T) *dataOutput[T] {
	out := &dataOutput[T]{}
	out.Body.Data = rows
	return out
}

type scriptOutput struct{ Body Script }

type listInput struct {
	httpapi.PageQuery
	OrgID      string `query:"orgId" format:"uuid" doc:"Scripts that apply to this organization: its own and partner-wide ones."`
	CategoryID string `query:"categoryId" format:"uuid"`
	Tag        string `query:"tag" maxLength:"50"`
	OSType     string `query:"osType" enum:"windows,macos,linux"`
	Language   string `query:"language" enum:"bash,sh,python,powershell,cmd"`
	Search     string `query:"search" maxLength:"200" doc:"Matches name or description."`
}

type createInput struct{ Body ScriptInput }

type updateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body ScriptInput
}

type cloneInput struct {
	ID   string `path:"id" maxLength:"100"`
	Body ScriptCopy
}

type templateInput struct {
	TemplateID string `path:"templateId" maxLength:"100"`
	Body       ScriptCopy
}

type executeInput struct {
	ID   string `path:"id" format:"uuid"`
	Body ScriptRun
}

type executeOutput struct{ Body ScriptRunResult }

type executionsInput struct {
	httpapi.PageQuery
	ID       string `path:"id" format:"uuid"`
	Status   string `query:"status" enum:"pending,queued,running,completed,failed,timeout,cancelled"`
	DeviceID string `query:"deviceId" format:"uuid"`
	BatchID  string `query:"batchId" format:"uuid"`
}

type executionOutput struct{ Body ScriptExecution }

type exportInput struct {
	IDs string `query:"ids" required:"true" doc:"Comma-separated script IDs, at most 200."`
}

type bundleOutput struct{ Body ScriptBundle }

type bundleInput struct{ Body BundleRequest }

type previewOutput struct{ Body BundlePreview }

type importOutput struct{ Body BundleImportResult }

// Register adds the /scripts routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Scripts"
	httpapi.Register(api, httpapi.Route{ID: "list-scripts", Method: http.MethodGet, Path: "/scripts", Tag: tag,
		Permission: access.ScriptsRead, Summary: "List scripts",
		Description: "Scripts in scope by name: the partner's partner-wide scripts and those of organizations in reach."},
		func(ctx context.Context, in *listInput) (*httpapi.ListBody[Script], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.List(ctx, ListFilter{OrgID: in.OrgID, CategoryID: in.CategoryID, Tag: in.Tag, OSType: in.OSType,
				Language: in.Language, Search: in.Search}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-script", Method: http.MethodPost, Path: "/scripts", Tag: tag,
		Permission: access.ScriptsWrite, Status: http.StatusCreated, Summary: "Create a script",
		Description: "The name is unique among the live scripts of its scope (409 SCRIPT_NAME_TAKEN). The first save is version 1.",
		Errors:      []int{http.StatusConflict}},
		func(ctx context.Context, in *createInput) (*scriptOutput, error) {
			sc, err := s.Create(ctx, in.Body)
			return &scriptOutput{sc}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-system-library-scripts", Method: http.MethodGet, Path: "/scripts/system-library",
		Tag: tag, Permission: access.ScriptsRead, Summary: "The system script library",
		Description: "Read-only scripts shipped with Gale; POST /scripts/import/{id} copies one into a tenant to run it."},
		func(ctx context.Context, _ *struct{}) (*dataOutput[LibraryScript], error) {
			return data(SystemLibrary()), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "import-library-script", Method: http.MethodPost, Path: "/scripts/import/{id}", Tag: tag,
		Permission: access.ScriptsWrite, Status: http.StatusCreated, Summary: "Copy a system library script into the tenant",
		Errors: []int{http.StatusNotFound, http.StatusConflict}},
		func(ctx context.Context, in *cloneInput) (*scriptOutput, error) {
			sc, err := s.Import(ctx, in.ID, in.Body)
			return &scriptOutput{sc}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "export-script-bundle", Method: http.MethodGet, Path: "/scripts/bundle/export", Tag: tag,
		Permission: access.ScriptsRead, Summary: "Export scripts as a bundle",
		Description: "Up to 200 scripts in scope; the bundle carries definitions, category and tag names, nothing of the tenant."},
		func(ctx context.Context, in *exportInput) (*bundleOutput, error) {
			b, err := s.Export(ctx, strings.Split(in.IDs, ","))
			return &bundleOutput{b}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "preview-script-bundle", Method: http.MethodPost, Path: "/scripts/bundle/preview", Tag: tag,
		Permission: access.ScriptsWrite, MFA: true, MaxBodyBytes: MaxBundleRequest, Summary: "BundlePreview a bundle import",
		Description: "Per entry: new, name-conflict or invalid (with the error). Writes nothing. A partner administrator signed in with MFA."},
		func(ctx context.Context, in *bundleInput) (*previewOutput, error) {
			p, err := s.PreviewBundle(ctx, in.Body)
			return &previewOutput{p}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "import-script-bundle", Method: http.MethodPost, Path: "/scripts/bundle/import", Tag: tag,
		Permission: access.ScriptsWrite, MFA: true, MaxBodyBytes: MaxBundleRequest, Summary: "Import a bundle",
		Description: "Entries are validated one by one (bad ones in errors, the rest import); nothing runs. Names already taken: " +
			"skip, rename (a numeric suffix in parentheses) or new-version. availability partner needs access to every organization " +
			"(403). Each imported script is audited with the bundle's SHA-256. Up to 200 scripts, 256 KB each, 20 MB per request."},
		func(ctx context.Context, in *bundleInput) (*importOutput, error) {
			r, err := s.ImportBundle(ctx, in.Body)
			return &importOutput{r}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-script-execution", Method: http.MethodGet, Path: "/scripts/executions/{id}", Tag: tag,
		Permission: access.ScriptsRead, Summary: "Get a script execution",
		Description: "While it runs, stdout and stderr show what the script printed so far."},
		func(ctx context.Context, in *idPath) (*executionOutput, error) {
			x, err := s.GetExecution(ctx, in.ID)
			return &executionOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "cancel-script-execution", Method: http.MethodPost, Path: "/scripts/executions/{id}/cancel",
		Tag: tag, Permission: access.ScriptsExecute, Summary: "Cancel a script execution",
		Description: "From pending, queued or running only (409 EXECUTION_ENDED otherwise); a running script's process group is killed on the device.",
		Errors:      []int{http.StatusConflict}},
		func(ctx context.Context, in *idPath) (*executionOutput, error) {
			x, err := s.CancelExecution(ctx, in.ID)
			return &executionOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-script", Method: http.MethodGet, Path: "/scripts/{id}", Tag: tag,
		Permission: access.ScriptsRead, Summary: "Get a script"},
		func(ctx context.Context, in *idPath) (*scriptOutput, error) {
			sc, err := s.Get(ctx, in.ID)
			return &scriptOutput{sc}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-script", Method: http.MethodPut, Path: "/scripts/{id}", Tag: tag,
		Permission: access.ScriptsWrite, Summary: "Replace a script",
		Description: "A change of content or of how it runs saves a new version (with versionNote). orgId never changes.",
		Errors:      []int{http.StatusConflict}},
		func(ctx context.Context, in *updateInput) (*scriptOutput, error) {
			sc, err := s.Update(ctx, in.ID, in.Body)
			return &scriptOutput{sc}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-script", Method: http.MethodDelete, Path: "/scripts/{id}", Tag: tag,
		Permission: access.ScriptsDelete, Status: http.StatusNoContent, Summary: "Delete a script",
		Description: "Refused while executions have not ended (409 SCRIPT_RUNNING). Executions stay readable.",
		Errors:      []int{http.StatusConflict}},
		func(ctx context.Context, in *idPath) (*struct{}, error) { return nil, s.Delete(ctx, in.ID) })
	httpapi.Register(api, httpapi.Route{ID: "execute-script", Method: http.MethodPost, Path: "/scripts/{id}/execute", Tag: tag,
		Permission: access.ScriptsExecute, Status: http.StatusAccepted, Summary: "Run a script on devices",
		Description: "One execution per device (1 to 500), carried by a run_script command; parameters reach the script as " +
			"environment variables. Devices of another OS than the script's are reported in skipped, not run."},
		func(ctx context.Context, in *executeInput) (*executeOutput, error) {
			r, err := s.Execute(ctx, in.ID, in.Body)
			return &executeOutput{r}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-script-executions", Method: http.MethodGet, Path: "/scripts/{id}/executions", Tag: tag,
		Permission: access.ScriptsRead, Summary: "List a script's executions", Description: "Newest first; a deleted script's too."},
		func(ctx context.Context, in *executionsInput) (*httpapi.ListBody[ScriptExecution], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListExecutions(ctx, in.ID, ExecutionFilter{Status: in.Status, DeviceID: in.DeviceID, BatchID: in.BatchID}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	s.registerLibrary(api)
}

type categoryOutput struct{ Body ScriptCategory }

type categoryCreateInput struct{ Body ScriptCategoryInput }

type categoryPatchInput struct {
	ID   string `path:"id" format:"uuid"`
	Body ScriptCategoryPatch
}

type orgQuery struct {
	httpapi.PageQuery
	OrgID string `query:"orgId" format:"uuid" doc:"Those that apply to this organization: its own and partner-wide ones."`
}

type versionsInput struct {
	httpapi.PageQuery
	ID string `path:"id" format:"uuid"`
}

type tagOutput struct{ Body ScriptTag }

type tagCreateInput struct{ Body ScriptTagInput }

type versionOutput struct{ Body ScriptVersion }

type versionCreateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body ScriptVersionInput
}

type rollbackInput struct {
	ID        string `path:"id" format:"uuid"`
	VersionID string `path:"versionId" format:"uuid"`
}

type usageInput struct {
	ID   string `path:"id" format:"uuid"`
	Days int    `query:"days" minimum:"0" maximum:"3650" doc:"Only executions of the last days; 0 or absent: all."`
}

type usageOutput struct{ Body ScriptUsage }

func (s *Service) registerLibrary(api *httpapi.Server) {
	const tag = "Script library"
	const base = "/script-library"
	httpapi.Register(api, httpapi.Route{ID: "list-script-categories", Method: http.MethodGet, Path: base + "/categories", Tag: tag,
		Permission: access.ScriptsRead, Summary: "List script categories", Description: "By name, case aside; parentId nests them."},
		func(ctx context.Context, in *orgQuery) (*httpapi.ListBody[ScriptCategory], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListCategories(ctx, in.OrgID, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-script-category", Method: http.MethodPost, Path: base + "/categories", Tag: tag,
		Permission: access.ScriptsWrite, Status: http.StatusCreated, Summary: "Create a script category",
		Description: "Unique by name under one parent in one scope (409); nested at most 5 deep.", Errors: []int{http.StatusConflict}},
		func(ctx context.Context, in *categoryCreateInput) (*categoryOutput, error) {
			c, err := s.CreateCategory(ctx, in.Body)
			return &categoryOutput{c}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-script-category", Method: http.MethodGet, Path: base + "/categories/{id}", Tag: tag,
		Permission: access.ScriptsRead, Summary: "Get a script category"},
		func(ctx context.Context, in *idPath) (*categoryOutput, error) {
			c, err := s.GetCategory(ctx, in.ID)
			return &categoryOutput{c}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-script-category", Method: http.MethodPatch, Path: base + "/categories/{id}", Tag: tag,
		Permission: access.ScriptsWrite, Summary: "Change a script category", Errors: []int{http.StatusConflict}},
		func(ctx context.Context, in *categoryPatchInput) (*categoryOutput, error) {
			c, err := s.UpdateCategory(ctx, in.ID, in.Body)
			return &categoryOutput{c}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-script-category", Method: http.MethodDelete, Path: base + "/categories/{id}", Tag: tag,
		Permission: access.ScriptsDelete, Status: http.StatusNoContent, Summary: "Delete a script category",
		Description: "Refused while it has subcategories (409 CATEGORY_HAS_CHILDREN); its scripts become uncategorised.",
		Errors:      []int{http.StatusConflict}},
		func(ctx context.Context, in *idPath) (*struct{}, error) { return nil, s.DeleteCategory(ctx, in.ID) })
	httpapi.Register(api, httpapi.Route{ID: "list-script-tags", Method: http.MethodGet, Path: base + "/tags", Tag: tag,
		Permission: access.ScriptsRead, Summary: "List script tags", Description: "By name, case aside."},
		func(ctx context.Context, in *orgQuery) (*httpapi.ListBody[ScriptTag], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListTags(ctx, in.OrgID, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-script-tag", Method: http.MethodPost, Path: base + "/tags", Tag: tag,
		Permission: access.ScriptsWrite, Status: http.StatusCreated, Summary: "Create a script tag", Errors: []int{http.StatusConflict}},
		func(ctx context.Context, in *tagCreateInput) (*tagOutput, error) {
			t, err := s.CreateTag(ctx, in.Body)
			return &tagOutput{t}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-script-tag", Method: http.MethodDelete, Path: base + "/tags/{id}", Tag: tag,
		Permission: access.ScriptsDelete, Status: http.StatusNoContent, Summary: "Delete a script tag", Description: "Removed from every script."},
		func(ctx context.Context, in *idPath) (*struct{}, error) { return nil, s.DeleteTag(ctx, in.ID) })
	httpapi.Register(api, httpapi.Route{ID: "list-script-versions", Method: http.MethodGet, Path: base + "/scripts/{id}/versions", Tag: tag,
		Permission: access.ScriptsRead, Summary: "List a script's versions", Description: "Newest first."},
		func(ctx context.Context, in *versionsInput) (*httpapi.ListBody[ScriptVersion], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.Versions(ctx, in.ID, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-script-version", Method: http.MethodPost, Path: base + "/scripts/{id}/versions", Tag: tag,
		Permission: access.ScriptsWrite, Status: http.StatusCreated, Summary: "Save a new version of a script",
		Description: "The fields given replace the current ones; always a new version, with its note."},
		func(ctx context.Context, in *versionCreateInput) (*versionOutput, error) {
			v, err := s.SaveVersion(ctx, in.ID, in.Body)
			return &versionOutput{v}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "rollback-script", Method: http.MethodPost, Path: base + "/scripts/{id}/rollback/{versionId}",
		Tag: tag, Permission: access.ScriptsWrite, Summary: "Roll a script back to a version",
		Description: "Saves the old version's definition as a new version; history is kept."},
		func(ctx context.Context, in *rollbackInput) (*scriptOutput, error) {
			sc, err := s.Rollback(ctx, in.ID, in.VersionID)
			return &scriptOutput{sc}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-script-templates", Method: http.MethodGet, Path: base + "/templates", Tag: tag,
		Permission: access.ScriptsRead, Summary: "List script templates", Description: "Starting points shipped with Gale."},
		func(ctx context.Context, _ *struct{}) (*dataOutput[LibraryScript], error) {
			return data(Templates()), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-script-from-template", Method: http.MethodPost, Path: base + "/from-template/{templateId}",
		Tag: tag, Permission: access.ScriptsWrite, Status: http.StatusCreated, Summary: "Create a script from a template",
		Errors: []int{http.StatusNotFound, http.StatusConflict}},
		func(ctx context.Context, in *templateInput) (*scriptOutput, error) {
			sc, err := s.FromTemplate(ctx, in.TemplateID, in.Body)
			return &scriptOutput{sc}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-script-usage", Method: http.MethodGet, Path: base + "/scripts/{id}/usage-stats", Tag: tag,
		Permission: access.ScriptsRead, Summary: "A script's usage", Description: "What its executions add up to, from the executions themselves."},
		func(ctx context.Context, in *usageInput) (*usageOutput, error) {
			u, err := s.Usage(ctx, in.ID, in.Days)
			return &usageOutput{u}, err
		})
}
