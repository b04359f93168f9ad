package thirdparty

import (
	"context"
	"net/http"

	"gale/internal/platform/access"
	"gale/internal/platform/httpapi"
)

type thirdPartyIDPath struct {
	ID string `path:"id" format:"uuid"`
}

type thirdPartyPackageOutput struct{ Body Package }

type thirdPartyInput struct {
	Body PackageInput
}

type thirdPartyUpdateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body PackageInput
}

type thirdPartyListInput struct {
	httpapi.PageQuery
	Vendor         string `query:"vendor" maxLength:"100" doc:"Only this vendor's entries (any case)."`
	PlatformTested string `query:"platformTested" enum:"true,false" doc:"Only entries whose latest version passed (true) or has not passed (false) a smoke test."`
	Search         string `query:"search" maxLength:"100" doc:"Entries whose name or vendor contains this text."`
}

type thirdPartyTestInput struct {
	ID   string `path:"id" format:"uuid"`
	Body struct {
		Version string `json:"version" minLength:"1" maxLength:"100" doc:"One of the entry's versions."`
	}
}

type thirdPartyTestOutput struct{ Body SmokeTest }

// Register adds the /third-party-catalog routes: the platform's administrators only (403 for
// every other caller).
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Third-party catalog"
	const only = " Platform administrators only (403 otherwise)."
	route := func(id, method, path string, perm access.Perm, summary, desc string, errors ...int) httpapi.Route {
		return httpapi.Route{ID: id, Method: method, Path: path, Tag: tag, Permission: perm, Summary: summary,
			Description: desc + only, Errors: errors}
	}
	httpapi.Register(api, route("list-third-party-packages", http.MethodGet, "/third-party-catalog", access.PatchesRead,
		"List the third-party catalog", "Entries with their versions (newest first) and last smoke test, oldest entry first."),
		func(ctx context.Context, in *thirdPartyListInput) (*httpapi.ListBody[Package], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			f := ListFilter{Vendor: in.Vendor, Search: in.Search}
			if in.PlatformTested != "" {
				tested := in.PlatformTested == "true"
				f.PlatformTested = &tested
			}
			rows, next, total, err := s.List(ctx, f, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	create := route("create-third-party-package", http.MethodPost, "/third-party-catalog", access.PatchesApprove,
		"Add a third-party application", "vendor, name, osTypes and packageNames are required; vendor and name are unique together "+
			"(409 THIRD_PARTY_PACKAGE_EXISTS). Each version's installer type must fit its system and the entry's.", http.StatusConflict)
	create.Status = http.StatusCreated
	httpapi.Register(api, create, func(ctx context.Context, in *thirdPartyInput) (*thirdPartyPackageOutput, error) {
		p, err := s.Create(ctx, in.Body)
		return &thirdPartyPackageOutput{p}, err
	})
	httpapi.Register(api, route("get-third-party-package", http.MethodGet, "/third-party-catalog/{id}", access.PatchesRead,
		"Get a third-party application", "", http.StatusNotFound),
		func(ctx context.Context, in *thirdPartyIDPath) (*thirdPartyPackageOutput, error) {
			p, err := s.Get(ctx, in.ID)
			return &thirdPartyPackageOutput{p}, err
		})
	httpapi.Register(api, route("update-third-party-package", http.MethodPatch, "/third-party-catalog/{id}", access.PatchesApprove,
		"Change a third-party application", "Changes the fields sent; versions, when sent, replace every version (a version whose "+
			"installer address and checksum stay the same keeps its smoke-test mark).", http.StatusNotFound, http.StatusConflict),
		func(ctx context.Context, in *thirdPartyUpdateInput) (*thirdPartyPackageOutput, error) {
			p, err := s.Update(ctx, in.ID, in.Body)
			return &thirdPartyPackageOutput{p}, err
		})
	del := route("delete-third-party-package", http.MethodDelete, "/third-party-catalog/{id}", access.PatchesApprove,
		"Remove a third-party application", "Removes the entry with its versions and smoke tests.", http.StatusNotFound)
	del.Status = http.StatusNoContent
	httpapi.Register(api, del, func(ctx context.Context, in *thirdPartyIDPath) (*struct{}, error) {
		return nil, s.Delete(ctx, in.ID)
	})
	test := route("test-third-party-package", http.MethodPost, "/third-party-catalog/{id}/test", access.PatchesApprove,
		"Queue a smoke test", "Queues a test of one version's installer (202): the server downloads it (at most 2 GiB, 10 minutes), "+
			"checks its SHA-256 and that it is an installer of its file type; a pass marks the version platformTested. The entry's "+
			"lastTest shows the outcome. 409 "+CodeTestInProgress+" while a test of the entry is queued or running.",
		http.StatusNotFound, http.StatusConflict)
	test.Status = http.StatusAccepted
	httpapi.Register(api, test, func(ctx context.Context, in *thirdPartyTestInput) (*thirdPartyTestOutput, error) {
		t, err := s.QueueTest(ctx, in.ID, in.Body.Version)
		return &thirdPartyTestOutput{t}, err
	})
}
