package software

import (
	"context"
	"io"
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"

	"gale/internal/domains/devices"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
)

type softwareIDPath struct {
	ID string `path:"id" format:"uuid"`
}

type softwareVersionsInput struct {
	httpapi.PageQuery
	ID string `path:"id" format:"uuid"`
}

type softwareCatalogOutput struct{ Body SoftwareCatalogItem }

type softwareCatalogListInput struct {
	httpapi.PageQuery
	OrgID    string `query:"orgId" format:"uuid" doc:"Items that apply to this organization: its own and partner-wide ones."`
	Category string `query:"category" maxLength:"100"`
	OS       string `query:"os" enum:"windows,macos,linux"`
}

type softwareCatalogSearchInput struct {
	httpapi.PageQuery
	Q     string `query:"q" required:"true" minLength:"1" maxLength:"200" doc:"Matches name, package name, vendor or description."`
	OrgID string `query:"orgId" format:"uuid"`
}

type softwareCatalogCreateInput struct{ Body SoftwareCatalogInput }

type softwareCatalogPatchInput struct {
	ID   string `path:"id" format:"uuid"`
	Body SoftwareCatalogPatch
}

type softwareVersionOutput struct{ Body SoftwareVersion }

// softwareVersionCreateInput adds a version: a JSON body names the file's https address; a
// raw (application/octet-stream) body is the file, described by the query parameters.
type softwareVersionCreateInput struct {
	ID          string   `path:"id" format:"uuid"`
	Version     string   `query:"version" maxLength:"100" doc:"Raw upload: the version."`
	FileType    string   `query:"fileType" enum:"deb,rpm,msi,exe,pkg,dmg" doc:"Raw upload: the file type."`
	SilentArgs  string   `query:"silentArgs" maxLength:"1000" doc:"Raw upload: arguments of an unattended install."`
	SupportedOS []string `query:"supportedOs" enum:"windows,macos,linux" doc:"Raw upload: default, the system of the file type."`
	Body        *SoftwareVersionInput
}

type softwareAgentFileInput struct {
	Authorization string `header:"Authorization" doc:"Bearer <agent token>"`
	AgentID       string `path:"agentId" format:"uuid"`
	VersionID     string `path:"versionId" format:"uuid"`
}

type softwareDeploymentOutput struct{ Body SoftwareDeployment }

type softwareDeploymentCreateInput struct{ Body SoftwareDeploymentInput }

type softwareDeploymentListInput struct {
	httpapi.PageQuery
	OrgID     string `query:"orgId" format:"uuid"`
	Status    string `query:"status" enum:"pending,running,completed,failed,partial,cancelled"`
	CatalogID string `query:"catalogId" format:"uuid"`
}

type softwareResultsInput struct {
	httpapi.PageQuery
	ID     string `path:"id" format:"uuid"`
	Status string `query:"status" enum:"waiting,queued,running,installed,failed,skipped,cancelled"`
}

type softwareFleetInput struct {
	httpapi.PageQuery
	Q     string `query:"q" maxLength:"200" doc:"Part of the name."`
	Name  string `query:"name" maxLength:"255" doc:"The exact name."`
	OrgID string `query:"orgId" format:"uuid"`
}

type softwareDeviceInput struct {
	httpapi.PageQuery
	DeviceID string `path:"deviceId" format:"uuid"`
	Search   string `query:"search" maxLength:"200"`
}

type softwareUninstallInput struct {
	DeviceID   string `path:"deviceId" format:"uuid"`
	SoftwareID string `path:"softwareId" maxLength:"40"`
}

type softwareCommandOutput struct{ Body devices.DeviceCommand }

// Register adds the /software routes and the agents' file download.
func (s *Service) Register(api *httpapi.Server) {
	s.registerCatalog(api)
	s.registerDeployments(api)
	s.registerInventory(api)
}

func (s *Service) registerCatalog(api *httpapi.Server) {
	const tag = "Software"
	httpapi.Register(api, httpapi.Route{ID: "list-software-catalog", Method: http.MethodGet, Path: "/software/catalog", Tag: tag,
		Permission: access.SoftwareRead, Summary: "List the software catalog",
		Description: "Items in scope by name: the partner's partner-wide ones and those of organizations in reach, each with its latest version."},
		func(ctx context.Context, in *softwareCatalogListInput) (*httpapi.ListBody[SoftwareCatalogItem], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListCatalog(ctx, CatalogFilter{OrgID: in.OrgID, Category: in.Category, OS: in.OS}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-software-catalog-item", Method: http.MethodPost, Path: "/software/catalog", Tag: tag,
		Permission: access.SoftwareWrite, Status: http.StatusCreated, Summary: "Add a catalog item",
		Description: "The name is unique among the live items of its scope (409 SOFTWARE_NAME_TAKEN).", Errors: []int{http.StatusConflict}},
		func(ctx context.Context, in *softwareCatalogCreateInput) (*softwareCatalogOutput, error) {
			it, err := s.CreateItem(ctx, in.Body)
			return &softwareCatalogOutput{it}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "search-software-catalog", Method: http.MethodGet, Path: "/software/catalog/search", Tag: tag,
		Permission: access.SoftwareRead, Summary: "Search the software catalog"},
		func(ctx context.Context, in *softwareCatalogSearchInput) (*httpapi.ListBody[SoftwareCatalogItem], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListCatalog(ctx, CatalogFilter{OrgID: in.OrgID, Search: in.Q}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "get-software-catalog-item", Method: http.MethodGet, Path: "/software/catalog/{id}", Tag: tag,
		Permission: access.SoftwareRead, Summary: "Get a catalog item"},
		func(ctx context.Context, in *softwareIDPath) (*softwareCatalogOutput, error) {
			it, err := s.GetItem(ctx, in.ID)
			return &softwareCatalogOutput{it}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-software-catalog-item", Method: http.MethodPatch, Path: "/software/catalog/{id}", Tag: tag,
		Permission: access.SoftwareWrite, Summary: "Change a catalog item", Errors: []int{http.StatusConflict}},
		func(ctx context.Context, in *softwareCatalogPatchInput) (*softwareCatalogOutput, error) {
			it, err := s.UpdateItem(ctx, in.ID, in.Body)
			return &softwareCatalogOutput{it}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-software-catalog-item", Method: http.MethodDelete, Path: "/software/catalog/{id}", Tag: tag,
		Permission: access.SoftwareDelete, Status: http.StatusNoContent, Summary: "Delete a catalog item",
		Description: "Refused while deployments of it are pending or running (409 SOFTWARE_DEPLOYING). Its deployments stay readable.",
		Errors:      []int{http.StatusConflict}},
		func(ctx context.Context, in *softwareIDPath) (*struct{}, error) { return nil, s.DeleteItem(ctx, in.ID) })
	httpapi.Register(api, httpapi.Route{ID: "list-software-versions", Method: http.MethodGet, Path: "/software/catalog/{id}/versions", Tag: tag,
		Permission: access.SoftwareRead, Summary: "List a catalog item's versions", Description: "Newest first."},
		func(ctx context.Context, in *softwareVersionsInput) (*httpapi.ListBody[SoftwareVersion], error) {
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
	httpapi.Register(api, httpapi.Route{ID: "create-software-version", Method: http.MethodPost, Path: "/software/catalog/{id}/versions", Tag: tag,
		Permission: access.SoftwareWrite, Status: http.StatusCreated, RawBodyBytes: MaxUploadBytes, Summary: "Add a version",
		Description: "Either a JSON body naming the file's https address and its sha256 (required: the agent refuses a file that does " +
			"not match), or the file itself as the raw body (application/octet-stream, up to 2 GiB: 413 beyond) with version and " +
			"fileType as query parameters: it streams into blob storage with its SHA-256 computed on the way, and agents download it " +
			"from the server with their own token, only while they have an install of it to carry out. The file type must fit the " +
			"system (deb and rpm: linux; msi and exe: windows; pkg and dmg: macos) and the item must support it. A version number is " +
			"unique per item (409 SOFTWARE_VERSION_EXISTS).",
		Errors: []int{http.StatusConflict, http.StatusRequestEntityTooLarge}},
		func(ctx context.Context, in *softwareVersionCreateInput) (*softwareVersionOutput, error) {
			if raw, ok := httpapi.RawBodyFrom(ctx); ok {
				if in.Version == "" || in.FileType == "" {
					return nil, apperr.Invalid("version", "a raw upload names version and fileType as query parameters")
				}
				v, err := s.Upload(ctx, in.ID, SoftwareUpload{Version: in.Version, FileType: in.FileType, SilentArgs: in.SilentArgs,
					SupportedOS: in.SupportedOS}, raw)
				return &softwareVersionOutput{v}, err
			}
			if in.Body == nil {
				return nil, apperr.Invalid("body", "send a JSON body, or the file as application/octet-stream")
			}
			v, err := s.AddVersion(ctx, in.ID, *in.Body)
			return &softwareVersionOutput{v}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "agent-software-file", Agent: true, Public: true, Method: http.MethodGet,
		Path: "/agents/{agentId}/software/{versionId}/file", Tag: "Enrollment keys and agents", Summary: "Download an uploaded software file",
		Description: "For agents, with their token: the file of a version the device has a software_install command of that has not " +
			"ended (404 otherwise). The bytes as application/octet-stream with Content-Length and X-Checksum-Sha256."},
		func(ctx context.Context, in *softwareAgentFileInput) (*huma.StreamResponse, error) {
			rd, info, err := s.AgentFile(ctx, in.Authorization, in.AgentID, in.VersionID)
			if err != nil {
				return nil, err
			}
			return &huma.StreamResponse{Body: func(hctx huma.Context) {
				defer rd.Close()
				hctx.SetHeader("Content-Type", "application/octet-stream")
				hctx.SetHeader("Content-Length", strconv.FormatInt(info.Size, 10))
				hctx.SetHeader("X-Checksum-Sha256", info.SHA256)
				hctx.SetStatus(http.StatusOK)
				if _, err := io.Copy(hctx.BodyWriter(), rd); err != nil {
					s.logger.WarnContext(ctx, "software file download interrupted", "versionId", in.VersionID, "deviceId", in.AgentID, "error", err)
				}
			}}, nil
		})
}

func (s *Service) registerDeployments(api *httpapi.Server) {
	const tag = "Software"
	httpapi.Register(api, httpapi.Route{ID: "list-software-deployments", Method: http.MethodGet, Path: "/software/deployments", Tag: tag,
		Permission: access.SoftwareRead, Summary: "List software deployments", Description: "Newest first, with devices per status."},
		func(ctx context.Context, in *softwareDeploymentListInput) (*httpapi.ListBody[SoftwareDeployment], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListDeployments(ctx, DeploymentFilter{OrgID: in.OrgID, Status: in.Status, CatalogID: in.CatalogID}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-software-deployment", Method: http.MethodPost, Path: "/software/deployments", Tag: tag,
		Permission: access.SoftwareExecute, Status: http.StatusCreated, Summary: "Deploy a version to devices",
		Description: "The targets resolve to the live devices of one organization (at most 5000). Devices whose system the version " +
			"does not install on are skipped, with the reason; devices held by a maintenance window, or all of them before the " +
			"window of a maintenance_window schedule is active, wait; the others get a software_install command at once."},
		func(ctx context.Context, in *softwareDeploymentCreateInput) (*softwareDeploymentOutput, error) {
			x, err := s.CreateDeployment(ctx, in.Body)
			return &softwareDeploymentOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-software-deployment", Method: http.MethodGet, Path: "/software/deployments/{id}", Tag: tag,
		Permission: access.SoftwareRead, Summary: "Get a software deployment"},
		func(ctx context.Context, in *softwareIDPath) (*softwareDeploymentOutput, error) {
			x, err := s.GetDeployment(ctx, in.ID)
			return &softwareDeploymentOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "cancel-software-deployment", Method: http.MethodPost, Path: "/software/deployments/{id}/cancel",
		Tag: tag, Permission: access.SoftwareExecute, Summary: "Cancel a software deployment",
		Description: "From pending or running only (409 DEPLOYMENT_ENDED otherwise). Waiting devices, and those whose command is still " +
			"queued on the server, are cancelled; devices whose agent has the command already finish and report.",
		Errors: []int{http.StatusConflict}},
		func(ctx context.Context, in *softwareIDPath) (*softwareDeploymentOutput, error) {
			x, err := s.CancelDeployment(ctx, in.ID)
			return &softwareDeploymentOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-software-deployment-results", Method: http.MethodGet, Path: "/software/deployments/{id}/results",
		Tag: tag, Permission: access.SoftwareRead, Summary: "A deployment's devices", Description: "One row per device, with its status."},
		func(ctx context.Context, in *softwareResultsInput) (*httpapi.ListBody[SoftwareDeploymentResult], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.Results(ctx, in.ID, in.Status, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
}

func (s *Service) registerInventory(api *httpapi.Server) {
	const tag = "Software"
	httpapi.Register(api, httpapi.Route{ID: "list-software-inventory", Method: http.MethodGet, Path: "/software/inventory", Tag: tag,
		Permission: access.SoftwareRead, Summary: "Installed software across the fleet",
		Description: "One row per name and version with the number of devices in scope whose last inventory has it, by name then " +
			"version. Cursor paging only."},
		func(ctx context.Context, in *softwareFleetInput) (*httpapi.ListBody[devices.SoftwareCount], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, err := s.Fleet(ctx, devices.SoftwareSummaryFilter{OrgID: in.OrgID, Name: in.Name, Search: in.Q}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, nil), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "list-device-software-inventory", Method: http.MethodGet, Path: "/software/inventory/{deviceId}",
		Tag: tag, Permission: access.SoftwareRead, Summary: "A device's installed software",
		Description: "What the device's last inventory reported, by name; softwareId stays the same across inventories."},
		func(ctx context.Context, in *softwareDeviceInput) (*httpapi.ListBody[SoftwareInstalledPackage], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.DeviceSoftware(ctx, in.DeviceID, in.Search, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "uninstall-device-software", Method: http.MethodPost,
		Path: "/software/inventory/{deviceId}/{softwareId}/uninstall", Tag: tag, Permission: access.SoftwareExecute,
		Status: http.StatusAccepted, Summary: "Uninstall a package from a device",
		Description: "Sends a software_uninstall command (the answer). Packages the system needs are refused (409 PROTECTED_SOFTWARE); " +
			"the next inventory shows the package gone.", Errors: []int{http.StatusConflict}},
		func(ctx context.Context, in *softwareUninstallInput) (*softwareCommandOutput, error) {
			c, err := s.Uninstall(ctx, in.DeviceID, in.SoftwareID)
			return &softwareCommandOutput{c}, err
		})
}
