// Package customfields lets a partner or an organization define extra typed attributes for
// devices (an asset tag, a contract number, a criticality level) and set their values per
// device. Definitions belong to a partner, optionally restricted to one organization; values
// live in device_custom_values as JSON, validated against the definition's type.
package customfields

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/mail"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Field types.
const (
	TypeText        = "text"
	TypeNumber      = "number"
	TypeBoolean     = "boolean"
	TypeDate        = "date"
	TypeSelect      = "select"
	TypeMultiselect = "multiselect"
	TypeURL         = "url"
	TypeEmail       = "email"
)

// Limits of definitions and values.
const (
	MaxOptions     = 100
	maxOptionLen   = 200
	maxTextLen     = 4096
	maxURLLen      = 2048
	maxEmailLen    = 254
	maxNameLen     = 200
	maxDescription = 2000
)

var types = []string{TypeText, TypeNumber, TypeBoolean, TypeDate, TypeSelect, TypeMultiselect, TypeURL, TypeEmail}

var keyPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// Field is the API view of a custom field definition.
type Field struct {
	ID          string    `json:"id" format:"uuid"`
	PartnerID   string    `json:"partnerId" format:"uuid"`
	OrgID       *string   `json:"orgId" doc:"The one organization the field applies to; null: every organization of the partner."`
	Key         string    `json:"key" doc:"Machine name, unique within the partner; never changes."`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Type        string    `json:"type" enum:"text,number,boolean,date,select,multiselect,url,email" doc:"Never changes."`
	Options     []string  `json:"options,omitempty" doc:"The choices of a select or multiselect field."`
	Required    bool      `json:"required" doc:"A value, once set, cannot be cleared."`
	Default     any       `json:"defaultValue,omitempty" doc:"Shown for devices without a value of their own."`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// NewField is the body of a create.
type NewField struct {
	PartnerID    string          `json:"partnerId,omitempty" format:"uuid" doc:"System callers only, and required for them: the partner the field belongs to."`
	OrgID        string          `json:"orgId,omitempty" format:"uuid" doc:"Restrict the field to one organization. Organization callers: their own (the default)."`
	Key          string          `json:"key" maxLength:"64" doc:"Machine name: a lower-case letter, then lower-case letters, digits or _ (at most 64)."`
	Name         string          `json:"name" maxLength:"200"`
	Description  string          `json:"description,omitempty" maxLength:"2000" multiline:"true"`
	Type         string          `json:"type" enum:"text,number,boolean,date,select,multiselect,url,email"`
	Options      []string        `json:"options,omitempty" maxItems:"100" doc:"Required for select and multiselect (1 to 100 distinct strings); refused otherwise."`
	Required     bool            `json:"required,omitempty"`
	DefaultValue json.RawMessage `json:"defaultValue,omitempty" doc:"A value of the field's type."`
}

// FieldUpdate holds the writable fields of a definition; absent fields are left as they are.
// key and type are accepted only unchanged (values already stored were validated against them).
type FieldUpdate struct {
	Key          *string         `json:"key,omitempty" maxLength:"64" doc:"Immutable: accepted only unchanged."`
	Type         *string         `json:"type,omitempty" doc:"Immutable: accepted only unchanged."`
	Name         *string         `json:"name,omitempty" maxLength:"200"`
	Description  *string         `json:"description,omitempty" maxLength:"2000" multiline:"true"`
	Options      []string        `json:"options,omitempty" maxItems:"100" doc:"Replaces the choices; an option still set on a device cannot be removed (409)."`
	Required     *bool           `json:"required,omitempty"`
	DefaultValue json.RawMessage `json:"defaultValue,omitempty" doc:"null removes the default."`
}

const fieldColumns = `f.id, f.partner_id, f.org_id, f.key, f.name, f.description, f.type, f.options, f.required,
	f.default_value, f.created_at, f.updated_at`

func scanField(row store.Scanner) (Field, error) {
	var f Field
	var orgID, options, def sql.NullString
	err := row.Scan(&f.ID, &f.PartnerID, &orgID, &f.Key, &f.Name, &f.Description, &f.Type, &options, &f.Required,
		&def, &f.CreatedAt, &f.UpdatedAt)
	if err != nil {
		return f, err
	}
	f.OrgID = store.StringPtr(orgID)
	f.Options = decodeOptions(options)
	f.Default = decodeValue(def)
	return f, nil
}

func decodeOptions(s sql.NullString) []string {
	var out []string
	if s.Valid {
		_ = json.Unmarshal([]byte(s.String), &out)
	}
	return out
}

// decodeValue reads a stored JSON value; NULL (or JSON null) is nil.
func decodeValue(s sql.NullString) any {
	if !s.Valid {
		return nil
	}
	var v any
	_ = json.Unmarshal([]byte(s.String), &v)
	return v
}

func validKey(key string) error {
	if !keyPattern.MatchString(key) {
		return apperr.Invalid("key", "use a lower-case letter, then up to 63 lower-case letters, digits or underscores")
	}
	return nil
}

func validName(name string) (string, error) {
	n := strings.TrimSpace(name)
	if n == "" || utf8.RuneCountInString(n) > maxNameLen {
		return "", apperr.Invalid("name", "name needs 1 to 200 characters")
	}
	return n, nil
}

// validOptions checks the options of a definition of type typ: select and multiselect need
// 1 to 100 distinct non-empty strings; other types take none.
func validOptions(typ string, opts []string) ([]string, error) {
	if typ != TypeSelect && typ != TypeMultiselect {
		if opts != nil {
			return nil, apperr.Invalid("options", "options are only for select and multiselect fields")
		}
		return nil, nil
	}
	if len(opts) == 0 || len(opts) > MaxOptions {
		return nil, apperr.Invalid("options", fmt.Sprintf("a %s field needs 1 to %d options", typ, MaxOptions))
	}
	out := make([]string, 0, len(opts))
	for _, o := range opts {
		o = strings.TrimSpace(o)
		if o == "" || utf8.RuneCountInString(o) > maxOptionLen {
			return nil, apperr.Invalid("options", "each option needs 1 to 200 characters")
		}
		if slices.Contains(out, o) {
			return nil, apperr.Invalid("options", "option "+o+" is listed twice")
		}
		out = append(out, o)
	}
	return out, nil
}

// checkValue validates raw (not JSON null) against a field of type typ with the given
// options and returns the value to store. The message names what is wrong without echoing
// the value.
func checkValue(typ string, options []string, raw json.RawMessage) (any, string) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, "not valid JSON"
	}
	str, isStr := v.(string)
	if isStr && str == "" {
		return nil, "an empty string is not a value; send null to clear the field"
	}
	switch typ {
	case TypeText:
		if !isStr {
			return nil, "expected a string"
		}
		if utf8.RuneCountInString(str) > maxTextLen {
			return nil, fmt.Sprintf("at most %d characters", maxTextLen)
		}
	case TypeNumber:
		if _, ok := v.(float64); !ok {
			return nil, "expected a number"
		}
	case TypeBoolean:
		if _, ok := v.(bool); !ok {
			return nil, "expected true or false"
		}
	case TypeDate:
		if _, err := time.Parse(time.DateOnly, str); !isStr || err != nil {
			return nil, "expected a date as YYYY-MM-DD"
		}
	case TypeSelect:
		if !isStr || !slices.Contains(options, str) {
			return nil, "expected one of the field's options"
		}
	case TypeMultiselect:
		items, ok := v.([]any)
		if !ok || len(items) == 0 {
			return nil, "expected a non-empty array of the field's options (null clears the field)"
		}
		seen := make([]string, 0, len(items))
		for _, it := range items {
			s, ok := it.(string)
			if !ok || !slices.Contains(options, s) {
				return nil, "every item must be one of the field's options"
			}
			if slices.Contains(seen, s) {
				return nil, "an option is chosen twice"
			}
			seen = append(seen, s)
		}
	case TypeURL:
		if !isStr || len(str) > maxURLLen {
			return nil, "expected an http or https URL"
		}
		u, err := url.Parse(str)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, "expected an http or https URL"
		}
	case TypeEmail:
		if !isStr || len(str) > maxEmailLen {
			return nil, "expected an email address"
		}
		a, err := mail.ParseAddress(str)
		if err != nil || a.Address != str || a.Name != "" {
			return nil, "expected an email address such as name@example.com"
		}
	default:
		return nil, "unknown field type"
	}
	return v, ""
}

// isNull reports whether raw is JSON null (a present field set to null).
func isNull(raw json.RawMessage) bool { return strings.TrimSpace(string(raw)) == "null" }

// validDefault checks a default value; nil or null means no default.
func validDefault(typ string, options []string, raw json.RawMessage) (any, error) {
	if raw == nil || isNull(raw) {
		return nil, nil
	}
	v, msg := checkValue(typ, options, raw)
	if msg != "" {
		return nil, apperr.Invalid("defaultValue", msg)
	}
	return v, nil
}
