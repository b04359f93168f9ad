package tenancy

import "gale/internal/platform/jsonenc"

// AppendJSON writes the organization as encoding/json would, without reflection: lists of
// organizations are among the API's most frequent responses (see jsonenc).
func (o *Organization) AppendJSON(b []byte) ([]byte, error) {
	if o.encoded != nil {
		return append(b, o.encoded...), nil
	}
	b = append(b, '{')
	b = jsonenc.String(jsonenc.Key(b, "id"), o.ID)
	b = jsonenc.String(jsonenc.Key(b, "partnerId"), o.PartnerID)
	b = jsonenc.String(jsonenc.Key(b, "name"), o.Name)
	b = jsonenc.String(jsonenc.Key(b, "slug"), o.Slug)
	b = jsonenc.String(jsonenc.Key(b, "type"), o.Type)
	b = jsonenc.String(jsonenc.Key(b, "status"), o.Status)
	b = jsonenc.IntPtr(jsonenc.Key(b, "maxEnrollmentKeyTtlMinutes"), o.MaxEnrollmentKeyTTLMinutes)
	b = jsonenc.StringPtr(jsonenc.Key(b, "contractStart"), o.ContractStart)
	b = jsonenc.StringPtr(jsonenc.Key(b, "contractEnd"), o.ContractEnd)
	b = jsonenc.Key(b, "billingContact")
	if c := o.BillingContact; c == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '{')
		for _, f := range [...]struct{ key, v string }{{"name", c.Name}, {"email", c.Email}, {"phone", c.Phone}} {
			if f.v != "" {
				b = jsonenc.String(jsonenc.Key(b, f.key), f.v)
			}
		}
		b = append(b, '}')
	}
	b, err := jsonenc.Raw(jsonenc.Key(b, "settings"), o.Settings)
	if err != nil {
		return b, err
	}
	if b, err = jsonenc.Time(jsonenc.Key(b, "createdAt"), o.CreatedAt); err != nil {
		return b, err
	}
	if b, err = jsonenc.Time(jsonenc.Key(b, "updatedAt"), o.UpdatedAt); err != nil {
		return b, err
	}
	if o.DeletedAt != nil {
		if b, err = jsonenc.Time(jsonenc.Key(b, "deletedAt"), *o.DeletedAt); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}
