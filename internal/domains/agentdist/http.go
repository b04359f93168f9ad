package agentdist

import (
	"context"
	"io"
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"

	"gale/internal/platform/access"
	"gale/internal/platform/httpapi"
)

type downloadInput struct {
	OS      string `path:"os" enum:"windows,darwin,linux"`
	Arch    string `path:"arch" enum:"amd64,arm64"`
	Version string `query:"version" maxLength:"64" doc:"Serve this registered version instead of the promoted one; 404 when it is not registered."`
}

type versionDownloadInput struct {
	Version string `path:"version" maxLength:"64"`
	OS      string `query:"os" required:"true" enum:"windows,darwin,linux"`
	Arch    string `query:"arch" required:"true" enum:"amd64,arm64"`
}

type versionOutput struct{ Body AgentVersion }

// RegisterRoutes adds the agent download, install script and agent version routes (Register
// is taken by the registration of a binary).
func (s *Service) RegisterRoutes(api *httpapi.Server) {
	const tag = "Enrollment keys and agents"

	httpapi.Register(api, httpapi.Route{ID: "download-agent", Method: http.MethodGet, Path: "/agents/download/{os}/{arch}", Tag: tag,
		Public: true, Errors: []int{http.StatusNotFound}, Summary: "Download the agent binary",
		Description: "No credential. Serves the promoted release for the platform, or with `version` that exact registered release. " +
			"Headers: `X-Agent-Version`, `X-Checksum-Sha256` (hex SHA-256 of the body), `Content-Disposition` " +
			"(`gale-agent`, `gale-agent.exe` on Windows)."},
		func(ctx context.Context, in *downloadInput) (*huma.StreamResponse, error) {
			return s.download(ctx, in.Version, in.OS, in.Arch)
		})
	httpapi.Register(api, httpapi.Route{ID: "get-agent-install-script", Method: http.MethodGet, Path: "/agents/install.sh", Tag: tag,
		Public: true, Summary: "The agent install script",
		Description: "No credential. A POSIX sh script for Linux and macOS that downloads the promoted agent, verifies its " +
			"checksum, installs it and enrolls the machine: `curl -fsSL <server>/api/v1/agents/install.sh | sudo sh -s -- " +
			"--key <enrollment key> --secret <enrollment secret> [--site-id <uuid>] [--version <v>]`."},
		func(context.Context, *struct{}) (*huma.StreamResponse, error) {
			return &huma.StreamResponse{Body: func(hctx huma.Context) {
				hctx.SetHeader("Content-Type", "text/x-shellscript; charset=utf-8")
				hctx.SetHeader("Content-Length", strconv.Itoa(len(s.install)))
				hctx.SetStatus(http.StatusOK)
				_, _ = hctx.BodyWriter().Write(s.install)
			}}, nil
		})
	httpapi.Register(api, httpapi.Route{ID: "list-agent-versions", Method: http.MethodGet, Path: "/agent-versions", Tag: tag,
		Permission: access.DevicesRead, Summary: "List agent versions",
		Description: "Every registered version with its platforms, newest first by semantic-version order. Not paged: the list is short."},
		func(ctx context.Context, _ *struct{}) (*httpapi.ListBody[AgentVersion], error) {
			rows, err := s.List(ctx)
			if err != nil {
				return nil, err
			}
			return &httpapi.ListBody[AgentVersion]{Body: httpapi.List[AgentVersion]{Data: rows}}, nil
		})
	httpapi.Register(api, httpapi.Route{ID: "get-latest-agent-version", Method: http.MethodGet, Path: "/agent-versions/latest", Tag: tag,
		Permission: access.DevicesRead, Errors: []int{http.StatusNotFound}, Summary: "The latest agent version",
		Description: "The promoted version or, when none is promoted, the highest registered one. 404 when none is registered."},
		func(ctx context.Context, _ *struct{}) (*versionOutput, error) {
			v, err := s.Latest(ctx)
			return &versionOutput{v}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "download-agent-version", Method: http.MethodGet, Path: "/agent-versions/{version}/download", Tag: tag,
		Permission: access.DevicesRead, Errors: []int{http.StatusNotFound}, Summary: "Download a registered agent version",
		Description: "The same bytes and headers as GET /agents/download/{os}/{arch}?version=; 404 when the version or its platform is not registered."},
		func(ctx context.Context, in *versionDownloadInput) (*huma.StreamResponse, error) {
			return s.download(ctx, in.Version, in.OS, in.Arch)
		})
	documentStreams(api)
}

// download opens the binary first, so a missing release is an error envelope rather than
// a truncated body.
func (s *Service) download(ctx context.Context, version, goos, arch string) (*huma.StreamResponse, error) {
	bin, rd, err := s.Open(ctx, version, goos, arch)
	if err != nil {
		return nil, err
	}
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		defer rd.Close()
		name := "gale-agent"
		if goos == "windows" {
			name += ".exe"
		}
		hctx.SetHeader("Content-Type", "application/octet-stream")
		hctx.SetHeader("Content-Length", strconv.FormatInt(bin.SizeBytes, 10))
		hctx.SetHeader("Content-Disposition", "attachment; filename="+name)
		hctx.SetHeader("X-Agent-Version", bin.Version)
		hctx.SetHeader("X-Checksum-Sha256", bin.SHA256)
		// The promoted release changes when another is promoted.
		hctx.SetHeader("Cache-Control", "no-cache")
		hctx.SetStatus(http.StatusOK)
		if _, err := io.Copy(hctx.BodyWriter(), rd); err != nil {
			s.logger.ErrorContext(ctx, "agent download interrupted", "version", bin.Version, "os", goos, "arch", arch,
				"error", err, "requestId", access.RequestFrom(ctx).ID)
		}
	}}, nil
}

// documentStreams says in the OpenAPI document what the streamed operations return, which
// huma cannot infer from a stream.
func documentStreams(api *httpapi.Server) {
	paths := api.API.OpenAPI().Paths
	binary := map[string]*huma.MediaType{"application/octet-stream": {Schema: &huma.Schema{Type: "string", Format: "binary"}}}
	headers := map[string]*huma.Param{
		"X-Agent-Version":     {Description: "The version served, without a leading v.", Schema: &huma.Schema{Type: "string"}},
		"X-Checksum-Sha256":   {Description: "Hex-encoded SHA-256 of the body.", Schema: &huma.Schema{Type: "string"}},
		"Content-Disposition": {Description: "attachment; filename=gale-agent (gale-agent.exe on Windows)", Schema: &huma.Schema{Type: "string"}},
	}
	for _, p := range []string{"/agents/download/{os}/{arch}", "/agent-versions/{version}/download"} {
		if item := paths[p]; item != nil && item.Get != nil {
			item.Get.Responses["200"] = &huma.Response{Description: "The agent binary.", Content: binary, Headers: headers}
		}
	}
	if item := paths["/agents/install.sh"]; item != nil && item.Get != nil {
		item.Get.Responses["200"] = &huma.Response{Description: "The install script.",
			Content: map[string]*huma.MediaType{"text/x-shellscript": {Schema: &huma.Schema{Type: "string"}}}}
	}
}
