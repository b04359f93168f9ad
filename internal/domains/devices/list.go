package devices

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// Page sizes of the device list. Cursor mode defaults to 50 and clamps at 500; legacy page
// mode clamps at 100 (see docs/api.md for why these of the spec's stated maxima).
const (
	DefaultPageSize    = 50
	MaxCursorPageSize  = 500
	MaxLegacyPageSize  = 100
	sortHostname       = "hostname"
	sortLastSeen       = "lastSeen"
	sortEnrolled       = "enrolled"
	maxFilterIDs       = 500
	sortKeyTimeLayout  = time.RFC3339Nano
	lastSeenSortColumn = "COALESCE(d.last_seen_at, d.created_at)"
	enrolledSortColumn = "COALESCE(d.enrolled_at, d.created_at)"
)

// ListFilter narrows and orders the device list.
type ListFilter struct {
	// IDs keeps only these devices (at most 500).
	IDs      []string
	OrgIDs   []string
	SiteIDs  []string
	GroupIDs []string
	Status   string
	Search   string
	// OSType keeps the devices of one operating system (linux, windows, macos).
	OSType string
	// Tag keeps the devices that carry it.
	Tag                   string
	Sort                  string
	Desc                  bool
	IncludeDecommissioned bool
	IncludeTotal          bool
}

// Groups is what the groups module declares for devices (see module.Kernel.Declare), which
// cannot import it: MemberOf renders the condition that the device in column deviceCol is a
// member of one of the groups groupIDs, with its arguments added to a, which the device list
// splices into its one statement; Owners finds the owners of groups that targets name.
type Groups struct {
	MemberOf func(a *store.Args, deviceCol string, groupIDs []string) string
	Owners   OwnerLookup
}

// useGroups takes what the groups module declared.
func (s *Service) useGroups(declared []Groups) error {
	if len(declared) > 1 {
		return fmt.Errorf("%d group lookups declared for devices, want one", len(declared))
	}
	if len(declared) == 1 {
		s.groups = declared[0]
	}
	return nil
}

// memberOf is the condition of the group filter; without a groups module no device is a
// member of any group.
func (s *Service) memberOf(a *store.Args, deviceCol string, groupIDs []string) string {
	if s.groups.MemberOf == nil {
		return "FALSE"
	}
	return s.groups.MemberOf(a, deviceCol, groupIDs)
}

// List returns a page of devices in scope, the next cursor, and the total when asked for
// (always in legacy page mode).
func (s *Service) List(ctx context.Context, f ListFilter, page store.Page) ([]*Device, string, *int, error) {
	var a store.Args
	conds, err := s.listConds(ctx, f, &a)
	if err != nil {
		return nil, "", nil, err
	}
	q := store.ListQuery{Columns: deviceColumns, From: " FROM devices d", Conds: conds, Args: &a, SortID: "d.id", Desc: f.Desc,
		Version: "d.row_version"}
	key := func(d *Device) (string, string) { return d.Hostname, d.ID }
	switch f.Sort {
	case "", sortHostname:
		q.SortKey = "d.hostname"
	case sortLastSeen:
		q.SortKey, q.KeyArg = lastSeenSortColumn, parseSortTime
		key = func(d *Device) (string, string) { return timeKey(d.LastSeen, d.CreatedAt), d.ID }
	case sortEnrolled:
		q.SortKey, q.KeyArg = enrolledSortColumn, parseSortTime
		key = func(d *Device) (string, string) { return timeKey(d.Enrolled, d.CreatedAt), d.ID }
	default:
		return nil, "", nil, apperr.Invalid("sort", "sort by hostname, lastSeen or enrolled")
	}
	var total *int
	if f.IncludeTotal && page.Number == 0 {
		var n int
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM devices d WHERE `+store.Where(conds), a.Values()...).Scan(&n); err != nil {
			return nil, "", nil, fmt.Errorf("count devices: %w", err)
		}
		total = &n
	}
	rows, next, pageTotal, err := store.CachedList(ctx, s.db, q, page, s.listRows, func(row store.Scanner) (*Device, error) {
		d, err := s.sc.scan(row)
		return &d, err
	}, key)
	if err != nil {
		return nil, "", nil, fmt.Errorf("list devices: %w", err)
	}
	if pageTotal != nil {
		total = pageTotal
	}
	return rows, next, total, nil
}

// listConds are the conditions of the device list's filter, the caller's scope first.
func (s *Service) listConds(ctx context.Context, f ListFilter, a *store.Args) ([]string, error) {
	conds := []string{access.ScopeFrom(ctx).OrgFilter(a, "d.org_id", "d.partner_id")}
	for _, ids := range [][]string{f.IDs, f.OrgIDs, f.SiteIDs, f.GroupIDs} {
		if len(ids) > maxFilterIDs {
			return nil, apperr.Invalid("filter", "at most 500 IDs per filter")
		}
		for _, id := range ids {
			if !store.ValidID(id) {
				return nil, apperr.Invalid("filter", "not a valid ID: "+id)
			}
		}
	}
	if len(f.IDs) > 0 {
		conds = append(conds, "d.id IN "+a.In(f.IDs))
	}
	if len(f.OrgIDs) > 0 {
		conds = append(conds, "d.org_id IN "+a.In(f.OrgIDs))
	}
	if len(f.SiteIDs) > 0 {
		conds = append(conds, "d.site_id IN "+a.In(f.SiteIDs))
	}
	if len(f.GroupIDs) > 0 {
		conds = append(conds, s.memberOf(a, "d.id", f.GroupIDs))
	}
	if !f.IncludeDecommissioned {
		conds = append(conds, "d.decommissioned_at IS NULL")
	}
	if f.Status != "" {
		conds = append(conds, "d.status = "+a.Add(f.Status))
	}
	if f.OSType != "" {
		if !slices.Contains(agentproto.OSTypes, f.OSType) {
			return nil, apperr.Invalid("osType", "linux, windows or macos")
		}
		conds = append(conds, "d.os_type = "+a.Add(f.OSType))
	}
	if f.Tag != "" {
		if !tagPattern.MatchString(f.Tag) {
			return nil, apperr.Invalid("tag", "a tag is 1 to 64 letters, digits, spaces or ._:/-, starting with a letter or digit")
		}
		conds = append(conds, HasTag(a, "d.id", f.Tag))
	}
	if f.Search != "" {
		conds = append(conds, s.db.ContainsIndexed(a, f.Search, "devices_name_search", "d.rowid", "d.hostname", "d.display_name"))
	}
	return conds, nil
}

// StatusCounts counts the devices of the list's filter by status (its Status, sort and
// paging aside).
func (s *Service) StatusCounts(ctx context.Context, f ListFilter) (map[string]int, error) {
	f.Status = ""
	var a store.Args
	conds, err := s.listConds(ctx, f, &a)
	if err != nil {
		return nil, err
	}
	type count struct {
		status string
		n      int
	}
	counts, err := store.QueryAll(ctx, s.db, `SELECT d.status, COUNT(*) FROM devices d WHERE `+store.Where(conds)+` GROUP BY d.status`,
		a.Values(), func(sc store.Scanner) (c count, err error) {
			err = sc.Scan(&c.status, &c.n)
			return c, err
		})
	if err != nil {
		return nil, fmt.Errorf("count devices by status: %w", err)
	}
	out := map[string]int{}
	for _, c := range counts {
		out[c.status] = c.n
	}
	return out, nil
}

func timeKey(t *time.Time, fallback time.Time) string {
	if t != nil {
		return t.UTC().Format(sortKeyTimeLayout)
	}
	return fallback.UTC().Format(sortKeyTimeLayout)
}

func parseSortTime(k string) (any, error) { return time.Parse(sortKeyTimeLayout, k) }

// Get returns a device in scope (decommissioned ones too: their record stays readable).
func (s *Service) Get(ctx context.Context, id string) (Device, error) {
	return s.get(ctx, s.db, access.ScopeFrom(ctx), id)
}

func (s *Service) get(ctx context.Context, q store.Querier, scope access.Scope, id string) (Device, error) {
	return s.read(ctx, q, scope, id, nil, nil)
}

// read is get that also reads one more expression over d (with its arguments added to a) into
// dest, when more is given.
func (s *Service) read(ctx context.Context, q store.Querier, scope access.Scope, id string, more func(a *store.Args) string,
	dest any) (Device, error) {
	var a store.Args
	conds := []string{scope.OrgFilter(&a, "d.org_id", "d.partner_id")}
	if more == nil {
		return store.ByID(ctx, q, "device", selectDevices, "d.id", id, &a, conds, s.sc.scan)
	}
	return store.ByID(ctx, q, "device", `SELECT `+deviceColumns+`, `+more(&a)+` FROM devices d`, "d.id", id, &a, conds,
		func(row store.Scanner) (Device, error) { return s.sc.scan(store.ScanAlso{Row: row, Dest: []any{dest}}) })
}

// getActive is get for changes: a decommissioned device is gone for every write.
func (s *Service) getActive(ctx context.Context, q store.Querier, scope access.Scope, id string) (Device, error) {
	return active(s.get(ctx, q, scope, id))
}

// getActiveToCommand is getActive that also says whether the device has commands queued, in
// the same read, as it is on the way of every command.
func (s *Service) getActiveToCommand(ctx context.Context, q store.Querier, scope access.Scope, id string) (Device, bool, error) {
	var queued bool
	d, err := active(s.read(ctx, q, scope, id, func(a *store.Args) string {
		return "EXISTS (SELECT 1 FROM device_commands q WHERE q.device_id = d.id AND q.status = " + a.Add(CommandQueued) + ")"
	}, &queued))
	return d, queued, err
}

// toCommand is a device that may be given commands, and whether it has some queued.
type toCommand struct {
	Device
	queued bool
}

// activeToCommand is getActiveToCommand for many devices in one read: the active devices in
// scope among ids, by ID; the others are missing from the map.
func (s *Service) activeToCommand(ctx context.Context, q store.Querier, scope access.Scope, ids []string) (map[string]toCommand, error) {
	valid := make([]string, 0, len(ids))
	for _, id := range ids {
		if store.ValidID(id) {
			valid = append(valid, id)
		}
	}
	out := make(map[string]toCommand, len(valid))
	if len(valid) == 0 {
		return out, nil
	}
	var a store.Args
	conds := []string{"d.id IN " + a.In(valid), scope.OrgFilter(&a, "d.org_id", "d.partner_id")}
	found, err := store.QueryAll(ctx, q, `SELECT `+deviceColumns+`, EXISTS (SELECT 1 FROM device_commands q WHERE q.device_id = d.id
		AND q.status = `+a.Add(CommandQueued)+`) FROM devices d WHERE `+store.Where(conds), a.Values(),
		func(row store.Scanner) (toCommand, error) {
			var c toCommand
			var err error
			c.Device, err = s.sc.scan(store.ScanAlso{Row: row, Dest: []any{&c.queued}})
			return c, err
		})
	if err != nil {
		return nil, fmt.Errorf("read devices to command: %w", err)
	}
	for _, c := range found {
		if c.DecommissionedAt == nil {
			out[c.ID] = c
		}
	}
	return out, nil
}

func active(d Device, err error) (Device, error) {
	if err == nil && d.DecommissionedAt != nil {
		return d, apperr.NotFound("device")
	}
	return d, err
}

// ListAll returns every device in scope that f selects, in List's order, reading page after
// page; it stops once it holds more than max (so a caller sees its limit was passed). Domains
// that aim work at an organization, sites or groups resolve their targets with it.
func (s *Service) ListAll(ctx context.Context, f ListFilter, max int) ([]Device, error) {
	var out []Device
	page := store.Page{Limit: MaxCursorPageSize}
	for {
		rows, next, _, err := s.List(ctx, f, page)
		if err != nil {
			return nil, err
		}
		for _, d := range rows {
			out = append(out, *d)
		}
		if next == "" || len(out) > max {
			return out, nil
		}
		page.Cursor = next
	}
}
