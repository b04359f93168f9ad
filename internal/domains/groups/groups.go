// Package groups holds device groups. A group belongs to one organization and is static (its
// members are added and removed by hand) or dynamic (its members are the organization's
// devices that match its filter, kept current as devices change, plus devices pinned by hand).
// Every change of membership is written to the group's membership log.
package groups

import (
	"database/sql"
	"encoding/json"
	"strings"
	"time"

	"gale/internal/platform/store"
)

// Group types.
const (
	TypeStatic  = "static"
	TypeDynamic = "dynamic"
)

// Member sources: static members were added (or pinned) by hand, dynamic ones match the filter.
const (
	SourceStatic  = "static"
	SourceDynamic = "dynamic"
)

// Membership log actions.
const (
	ActionJoined   = "joined"
	ActionLeft     = "left"
	ActionPinned   = "pinned"
	ActionUnpinned = "unpinned"
)

// Membership log reasons.
const (
	ReasonAddedByUser     = "added by user"
	ReasonRemovedByUser   = "removed by user"
	ReasonPinnedByUser    = "pinned by user"
	ReasonUnpinnedByUser  = "unpinned by user"
	ReasonMatches         = "matches filter"
	ReasonNoLongerMatches = "no longer matches filter"
	ReasonFilterChanged   = "group filter changed"
	ReasonDeviceMoved     = "device moved"
	ReasonDecommissioned  = "device decommissioned"
)

// Limits.
const (
	maxNameLen        = 200
	maxDescriptionLen = 2000
	// MaxAddDevices is the most devices one POST /groups/{id}/devices adds.
	MaxAddDevices = 500
)

// Group is the API view of a device group.
type Group struct {
	ID          string          `json:"id" format:"uuid"`
	PartnerID   string          `json:"partnerId" format:"uuid"`
	OrgID       string          `json:"orgId" format:"uuid"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Type        string          `json:"type" enum:"static,dynamic" doc:"Never changes."`
	Filter      json.RawMessage `json:"filter" doc:"The dynamic group's filter (see docs/api.md); null for a static group."`
	DeviceCount int             `json:"deviceCount" doc:"Members, pinned ones included."`
	CreatedBy   *string         `json:"createdBy" doc:"The user or API key that created the group."`
	CreatedAt   time.Time       `json:"createdAt"`
	UpdatedAt   time.Time       `json:"updatedAt"`
}

// NewGroup is the body of a create.
type NewGroup struct {
	OrgID       string          `json:"orgId,omitempty" format:"uuid" doc:"Required except for organization callers (whose own organization is the default)."`
	Name        string          `json:"name" maxLength:"200" doc:"1 to 200 characters, unique within the organization ignoring case."`
	Description string          `json:"description,omitempty" maxLength:"2000" multiline:"true"`
	Type        string          `json:"type" enum:"static,dynamic"`
	Filter      json.RawMessage `json:"filter,omitempty" doc:"Required for a dynamic group, refused for a static one: {\"all\"|\"any\": [{\"field\", \"op\", \"value\"}, ...]}."`
}

// GroupUpdate holds the writable fields of a group; absent fields are left as they are. type
// is accepted only unchanged.
type GroupUpdate struct {
	Name        *string         `json:"name,omitempty" maxLength:"200"`
	Description *string         `json:"description,omitempty" maxLength:"2000" multiline:"true"`
	Type        *string         `json:"type,omitempty" doc:"Immutable: accepted only unchanged."`
	Filter      json.RawMessage `json:"filter,omitempty" doc:"Dynamic groups only: replaces the filter and recomputes the membership at once."`
}

// Member is a device in a group.
type Member struct {
	DeviceID    string    `json:"deviceId" format:"uuid"`
	Hostname    string    `json:"hostname"`
	DisplayName *string   `json:"displayName"`
	Status      string    `json:"status"`
	OSType      string    `json:"osType"`
	Source      string    `json:"source" enum:"static,dynamic" doc:"dynamic: the device matches the group's filter; static: added or pinned by hand."`
	Pinned      bool      `json:"pinned" doc:"Dynamic groups: the device stays whatever the filter says."`
	AddedAt     time.Time `json:"addedAt"`
}

// MembershipActor names who changed a membership: a user or API key, or the system (recomputation).
type MembershipActor struct {
	Type string  `json:"type" doc:"user, api_key or system."`
	ID   *string `json:"id"`
}

// MembershipEvent is one membership change.
type MembershipEvent struct {
	ID         string          `json:"id" format:"uuid"`
	DeviceID   string          `json:"deviceId" format:"uuid"`
	Hostname   string          `json:"hostname" doc:"The device's hostname when it happened."`
	Action     string          `json:"action" enum:"joined,left,pinned,unpinned"`
	Reason     string          `json:"reason"`
	Actor      MembershipActor `json:"actor"`
	OccurredAt time.Time       `json:"occurredAt"`
}

// AddedItem is a device added to a static group.
type AddedItem struct {
	DeviceID string `json:"deviceId" format:"uuid"`
	Hostname string `json:"hostname"`
}

// AddOutcome is a device that was not added, and why.
type AddOutcome struct {
	DeviceID string `json:"deviceId"`
	Code     string `json:"code"`
	Reason   string `json:"reason"`
}

// AddResult is the outcome per device of adding devices to a static group: added, skipped
// (already a member) or failed (not found, decommissioned, of another organization).
type AddResult struct {
	Added   []AddedItem  `json:"added"`
	Skipped []AddOutcome `json:"skipped"`
	Failed  []AddOutcome `json:"failed"`
}

// PreviewDevice is a device a filter matches.
type PreviewDevice struct {
	DeviceID    string  `json:"deviceId" format:"uuid"`
	Hostname    string  `json:"hostname"`
	DisplayName *string `json:"displayName"`
	Status      string  `json:"status"`
	OSType      string  `json:"osType"`
	Member      bool    `json:"member" doc:"Whether the device is a member of the group now."`
}

// Preview is what a filter matches right now.
type Preview struct {
	Filter  json.RawMessage `json:"filter" doc:"The filter evaluated: the body's, else the group's."`
	Count   int             `json:"count" doc:"Devices the filter matches."`
	Data    []PreviewDevice `json:"data" doc:"The matching devices by hostname, at most limit of them."`
	HasMore bool            `json:"hasMore" doc:"More devices match than data holds."`
}

const groupColumns = `g.id, g.partner_id, g.org_id, g.name, g.description, g.type, g.filter, g.created_by, g.created_at, g.updated_at,
	(SELECT COUNT(*) FROM device_group_members m JOIN devices md ON md.id = m.device_id
		WHERE m.group_id = g.id AND md.decommissioned_at IS NULL)`

func scanGroup(row store.Scanner) (Group, error) {
	var g Group
	var filter, createdBy sql.NullString
	err := row.Scan(&g.ID, &g.PartnerID, &g.OrgID, &g.Name, &g.Description, &g.Type, &filter, &createdBy, &g.CreatedAt,
		&g.UpdatedAt, &g.DeviceCount)
	if err != nil {
		return g, err
	}
	if filter.Valid {
		g.Filter = canonicalJSON(filter.String)
	}
	g.CreatedBy = store.StringPtr(createdBy)
	return g, nil
}

// canonicalJSON re-encodes stored JSON with sorted keys and no spaces, so that a filter reads
// the same from either database (PostgreSQL's JSONB reorders keys).
func canonicalJSON(s string) json.RawMessage {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return json.RawMessage(s)
	}
	out, _ := json.Marshal(v)
	return out
}

const memberColumns = `d.id, d.hostname, d.display_name, d.status, d.os_type, m.source, m.pinned, m.added_at`

func scanMember(row store.Scanner) (Member, error) {
	var m Member
	var display sql.NullString
	err := row.Scan(&m.DeviceID, &m.Hostname, &display, &m.Status, &m.OSType, &m.Source, &m.Pinned, &m.AddedAt)
	m.DisplayName = store.StringPtr(display)
	return m, err
}

const logColumns = `l.id, l.device_id, l.hostname, l.action, l.reason, l.actor_type, l.actor_id, l.occurred_at`

func scanLog(row store.Scanner) (MembershipEvent, error) {
	var e MembershipEvent
	var actorID sql.NullString
	err := row.Scan(&e.ID, &e.DeviceID, &e.Hostname, &e.Action, &e.Reason, &e.Actor.Type, &actorID, &e.OccurredAt)
	e.Actor.ID = store.StringPtr(actorID)
	return e, err
}
