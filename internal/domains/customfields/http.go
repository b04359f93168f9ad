package customfields

import (
	"gale/internal/platform/access"

	"context"
	"encoding/json"
	"net/http"

	"gale/internal/platform/httpapi"
)

type idPath struct {
	ID string `path:"id" format:"uuid"`
}

type fieldOutput struct{ Body Field }

type createInput struct{ Body NewField }

type updateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body FieldUpdate
}

type listInput struct {
	httpapi.PageQuery
	OrgID  string `query:"orgId" format:"uuid" doc:"Fields that apply to this organization: its own and partner-wide ones."`
	Search string `query:"search" maxLength:"200" doc:"Matches name or key."`
}

type valuesOutput struct{ Body DeviceValues }

type valuesBody struct {
	Values map[string]json.RawMessage `json:"values" doc:"Field key to value; null clears the device's value (the default shows again)."`
}

type setValuesInput struct {
	ID   string `path:"id" format:"uuid"`
	Body valuesBody
}

// Register adds the /custom-fields routes and the device values routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Custom fields"
	httpapi.Register(api, httpapi.Route{ID: "list-custom-fields", Method: http.MethodGet, Path: "/custom-fields", Tag: tag,
		Permission: access.CustomFieldsRead, Summary: "List custom fields",
		Description: "Definitions in scope, by name: the partner's partner-wide fields and those of organizations in reach."},
		func(ctx context.Context, in *listInput) (*httpapi.ListBody[Field], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.List(ctx, ListFilter{OrgID: in.OrgID, Search: in.Search}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-custom-field", Method: http.MethodPost, Path: "/custom-fields", Tag: tag,
		Permission: access.CustomFieldsWrite, Status: http.StatusCreated, Summary: "Create a custom field",
		Description: "The key is unique within the partner (409). Organization callers create fields of their own organization only."},
		func(ctx context.Context, in *createInput) (*fieldOutput, error) {
			f, err := s.Create(ctx, in.Body)
			return &fieldOutput{f}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-custom-field", Method: http.MethodGet, Path: "/custom-fields/{id}", Tag: tag,
		Permission: access.CustomFieldsRead, Summary: "Get a custom field"},
		func(ctx context.Context, in *idPath) (*fieldOutput, error) {
			f, err := s.Get(ctx, in.ID)
			return &fieldOutput{f}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-custom-field", Method: http.MethodPatch, Path: "/custom-fields/{id}", Tag: tag,
		Permission: access.CustomFieldsWrite, Summary: "Change a custom field",
		Description: "key and type are immutable. Partner-wide fields are changed only by callers reaching the whole partner (403 otherwise)."},
		func(ctx context.Context, in *updateInput) (*fieldOutput, error) {
			f, err := s.Update(ctx, in.ID, in.Body)
			return &fieldOutput{f}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-custom-field", Method: http.MethodDelete, Path: "/custom-fields/{id}", Tag: tag,
		Permission: access.CustomFieldsWrite, Status: http.StatusNoContent, Summary: "Delete a custom field",
		Description: "Removes every device's value of the field too."},
		func(ctx context.Context, in *idPath) (*struct{}, error) {
			return nil, s.Delete(ctx, in.ID)
		})

	httpapi.Register(api, httpapi.Route{ID: "get-device-custom-fields", Method: http.MethodGet, Path: "/devices/{id}/custom-fields", Tag: tag,
		Permission: access.DevicesRead, Summary: "A device's custom field values",
		Description: "Every field applicable to the device's organization with the device's value, or the default (isDefault)."},
		func(ctx context.Context, in *idPath) (*valuesOutput, error) {
			v, err := s.DeviceValues(ctx, in.ID)
			return &valuesOutput{v}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "set-device-custom-fields", Method: http.MethodPatch, Path: "/devices/{id}/custom-fields", Tag: tag,
		Permission: access.DevicesWrite, Summary: "Set a device's custom field values",
		Description: "Body {values: {key: value}}; null clears. Each value is validated against its field's type; problems come back per key."},
		func(ctx context.Context, in *setValuesInput) (*valuesOutput, error) {
			v, err := s.SetDeviceValues(ctx, in.ID, in.Body.Values)
			return &valuesOutput{v}, err
		})
}
