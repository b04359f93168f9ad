package customfields

import (
	"context"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/platform/access"
	"gale/internal/platform/module"
	"gale/internal/platform/partnerexport"
)

// Module serves custom field definitions and device values.
var Module = module.Module{Name: "customfields", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock})
	s.Register(k.HTTP)
	k.OnReady(func(context.Context) error {
		s.plug(module.Declared[Hook](k))
		return nil
	})
	k.Declare(devices.Hooks{Moved: s.DeviceMoved})
	k.Provide(s)
	k.Declare(partnerexport.Export[Field]{Name: "custom-fields", Scope: access.CustomFieldsRead,
		Summary: "Export custom field definitions", Fetch: s.ExportFields,
		Description: "Partner-wide definitions and those of the partner's organizations.",
		Key:         func(f Field) (time.Time, []string) { return f.UpdatedAt, []string{f.ID} }})
	k.Declare(partnerexport.Export[ExportedValue]{Name: "custom-field-values", Scope: access.CustomFieldsRead,
		Summary: "Export custom field values", Fetch: s.ExportValues,
		Description: "Values set on devices (a field's default is on its definition). A cleared value leaves the export.",
		Key: func(v ExportedValue) (time.Time, []string) {
			return v.UpdatedAt, []string{v.DeviceID, v.FieldID}
		}})
	return nil
}}
