package rollouts

import (
	"context"
	"net/http"

	"gale/internal/platform/access"
	"gale/internal/platform/httpapi"
)

type deploymentPath struct {
	ID string `path:"id" format:"uuid"`
}

type deploymentListInput struct {
	httpapi.PageQuery
	OrgID  string `query:"orgId" format:"uuid"`
	Status string `query:"status" enum:"draft,pending,running,paused,completed,failed,cancelled"`
}

type deploymentOutput struct{ Body Deployment }

type deploymentCreateInput struct{ Body DeploymentInput }

type deploymentUpdateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body DeploymentUpdate
}

type deploymentDevicesInput struct {
	httpapi.PageQuery
	ID     string `path:"id" format:"uuid"`
	Status string `query:"status" enum:"pending,waiting,queued,running,succeeded,failed,skipped,cancelled"`
	Batch  int    `query:"batch" minimum:"0" doc:"Only this batch's devices."`
}

type deploymentDevicePath struct {
	ID       string `path:"id" format:"uuid"`
	DeviceID string `path:"deviceId" format:"uuid"`
}

type deploymentDeviceOutput struct{ Body DeploymentDevice }

// Register adds the /deployments routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Deployments"
	read, write := access.ConfigurationRead, access.ConfigurationWrite
	conflict := []int{http.StatusConflict}
	httpapi.Register(api, httpapi.Route{ID: "list-deployments", Method: http.MethodGet, Path: "/deployments", Tag: tag, Permission: read,
		Summary: "List deployments", Description: "Deployments (rollouts) in scope, newest first, with their device totals."},
		func(ctx context.Context, in *deploymentListInput) (*httpapi.ListBody[Deployment], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.List(ctx, ListFilter{OrgID: in.OrgID, Status: in.Status}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-deployment", Method: http.MethodPost, Path: "/deployments", Tag: tag, Permission: write,
		Status: http.StatusCreated, Summary: "Create a deployment",
		Description: "A draft: a payload for the devices of one organization, its targets, strategy and retries. See the API notes."},
		func(ctx context.Context, in *deploymentCreateInput) (*deploymentOutput, error) {
			x, err := s.Create(ctx, in.Body)
			return &deploymentOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-deployment", Method: http.MethodGet, Path: "/deployments/{id}", Tag: tag, Permission: read,
		Summary: "Get a deployment"},
		func(ctx context.Context, in *deploymentPath) (*deploymentOutput, error) {
			x, err := s.Get(ctx, in.ID)
			return &deploymentOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-deployment", Method: http.MethodPatch, Path: "/deployments/{id}", Tag: tag, Permission: write,
		Summary: "Change a draft deployment", Description: "Absent fields stay. Only a draft changes (409 DEPLOYMENT_NOT_DRAFT).",
		Errors: conflict},
		func(ctx context.Context, in *deploymentUpdateInput) (*deploymentOutput, error) {
			x, err := s.Update(ctx, in.ID, in.Body)
			return &deploymentOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-deployment", Method: http.MethodDelete, Path: "/deployments/{id}", Tag: tag,
		Permission: write, Status: http.StatusNoContent, Summary: "Delete a deployment",
		Description: "A draft or ended one (completed, failed, cancelled), with its devices; otherwise 409 DEPLOYMENT_STATE_CONFLICT.",
		Errors:      conflict},
		func(ctx context.Context, in *deploymentPath) (*struct{}, error) { return nil, s.Delete(ctx, in.ID) })
	transitions := []struct {
		id, path, summary, description string
		do                             func(context.Context, string) (Deployment, error)
		errs                           []int
	}{
		{"initialize-deployment", "initialize", "Initialize a deployment", "Draft → pending: resolves the targets into devices, numbered " +
			"into batches. Targets naming no device are 422 DEPLOYMENT_NO_DEVICES.", s.Initialize,
			[]int{http.StatusConflict, http.StatusUnprocessableEntity}},
		{"start-deployment", "start", "Start a deployment", "Pending → running: the first batch goes out. Needs the payload's execute " +
			"permission too. Of concurrent starts one wins; the others are 409 DEPLOYMENT_STATE_CONFLICT.", s.Start, conflict},
		{"pause-deployment", "pause", "Pause a deployment", "Running → paused: nothing more goes out; devices under way finish.", s.Pause, conflict},
		{"resume-deployment", "resume", "Resume a deployment", "Paused → running: the next batch goes out once due. Needs the payload's " +
			"execute permission too.", s.Resume, conflict},
		{"cancel-deployment", "cancel", "Cancel a deployment", "Draft, pending, running or paused → cancelled: devices not yet sent are " +
			"cancelled with their queued commands; commands the agents already have finish.", s.Cancel, conflict},
	}
	for _, t := range transitions {
		httpapi.Register(api, httpapi.Route{ID: t.id, Method: http.MethodPost, Path: "/deployments/{id}/" + t.path, Tag: tag, Permission: write,
			Summary: t.summary, Description: t.description, Errors: t.errs},
			func(ctx context.Context, in *deploymentPath) (*deploymentOutput, error) {
				x, err := t.do(ctx, in.ID)
				return &deploymentOutput{x}, err
			})
	}
	httpapi.Register(api, httpapi.Route{ID: "list-deployment-devices", Method: http.MethodGet, Path: "/deployments/{id}/devices", Tag: tag,
		Permission: read, Summary: "List a deployment's devices", Description: "Its devices with their batch, status, attempts and latest command."},
		func(ctx context.Context, in *deploymentDevicesInput) (*httpapi.ListBody[DeploymentDevice], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListDevices(ctx, in.ID, DeviceFilter{Status: in.Status, Batch: in.Batch}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "retry-deployment-device", Method: http.MethodPost, Path: "/deployments/{id}/devices/{deviceId}/retry",
		Tag: tag, Permission: write, Summary: "Retry a failed device",
		Description: "Deploys a failed device of a running, paused or failed deployment again now (a failed deployment runs again until " +
			"the device ended). Another device state is 409 DEVICE_NOT_FAILED. Needs the payload's execute permission too.", Errors: conflict},
		func(ctx context.Context, in *deploymentDevicePath) (*deploymentDeviceOutput, error) {
			d, err := s.RetryDevice(ctx, in.ID, in.DeviceID)
			return &deploymentDeviceOutput{d}, err
		})
}
