package search

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
)

// MaxTags is the most tags GET /tags returns (its default too): a tag cloud, not a list to page.
const MaxTags = 1000

// maxTagFilter is the most tags GET /tags/devices combines.
const maxTagFilter = 20

// Tag is one distinct tag with the number of devices carrying it.
type Tag struct {
	Tag         string `json:"tag"`
	DeviceCount int    `json:"deviceCount"`
}

// TagList is the answer of GET /tags.
type TagList struct {
	Data    []Tag `json:"data"`
	HasMore bool  `json:"hasMore" doc:"More tags match than limit; narrow with search."`
}

// TaggedDevice is a row of GET /tags/devices.
type TaggedDevice struct {
	ID          string     `json:"id" format:"uuid"`
	Hostname    string     `json:"hostname"`
	DisplayName *string    `json:"displayName"`
	OrgID       string     `json:"orgId" format:"uuid"`
	SiteID      string     `json:"siteId" format:"uuid"`
	Status      string     `json:"status"`
	OSType      string     `json:"osType"`
	LastSeen    *time.Time `json:"lastSeen"`
	Tags        []string   `json:"tags"`
}

// Tags lists the distinct tags of live devices in scope, by tag, with device counts. search
// matches anywhere in the tag, case-insensitively; limit is clamped to 1..MaxTags.
func (s *Service) Tags(ctx context.Context, search string, limit int) (TagList, error) {
	if limit <= 0 || limit > MaxTags {
		limit = MaxTags
	}
	var a store.Args
	conds := []string{deviceInScope(access.ScopeFrom(ctx), &a)}
	if search != "" {
		conds = append(conds, store.Contains(&a, search, "t.tag"))
	}
	tags, err := store.QueryAll(ctx, s.db, devices.SelectLive("t.tag, COUNT(*)", devices.JoinTags("t"), conds...)+
		` GROUP BY t.tag ORDER BY t.tag LIMIT `+a.Add(limit+1), a.Values(), func(row store.Scanner) (Tag, error) {
		var t Tag
		return t, row.Scan(&t.Tag, &t.DeviceCount)
	})
	if err != nil {
		return TagList{}, fmt.Errorf("list device tags: %w", err)
	}
	out := TagList{Data: tags}
	if len(out.Data) > limit {
		out.Data, out.HasMore = out.Data[:limit], true
	}
	return out, nil
}

// parseTags merges tag and the comma-separated tags into the distinct tags a device must all carry.
func parseTags(tag, tags string) ([]string, error) {
	var out []string
	for _, t := range append([]string{tag}, strings.Split(tags, ",")...) {
		if t = strings.TrimSpace(t); t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil, apperr.Invalid("tag", "give tag, or tags as a comma-separated list")
	}
	if len(out) > maxTagFilter {
		return nil, apperr.Invalid("tags", "at most 20 tags")
	}
	return out, nil
}

const taggedColumns = `d.id, d.hostname, d.display_name, d.org_id, d.site_id, d.status, d.os_type, d.last_seen_at`

func scanTagged(row store.Scanner) (TaggedDevice, error) {
	var d TaggedDevice
	var display sql.NullString
	var seen sql.NullTime
	err := row.Scan(&d.ID, &d.Hostname, &display, &d.OrgID, &d.SiteID, &d.Status, &d.OSType, &seen)
	d.DisplayName, d.LastSeen = store.StringPtr(display), store.TimePtr(seen)
	return d, err
}

// TaggedDevices lists live devices in scope that carry every one of tags, by hostname.
func (s *Service) TaggedDevices(ctx context.Context, tags []string, page store.Page) ([]TaggedDevice, string, *int, error) {
	var a store.Args
	conds := []string{deviceInScope(access.ScopeFrom(ctx), &a)}
	for _, t := range tags {
		conds = append(conds, devices.HasTag(&a, "d.id", t))
	}
	rows, next, total, err := store.List(ctx, s.db, devices.ListLive(taggedColumns, "", conds, &a), page, scanTagged,
		func(d TaggedDevice) (string, string) { return d.Hostname, d.ID })
	if err != nil {
		return rows, next, total, fmt.Errorf("list tagged devices: %w", err)
	}
	if len(rows) == 0 {
		return rows, next, total, nil
	}
	return rows, next, total, s.loadTags(ctx, rows)
}

// loadTags fills the tags of a page of devices in one query.
func (s *Service) loadTags(ctx context.Context, page []TaggedDevice) error {
	ids := make([]string, len(page))
	index := make(map[string]int, len(page))
	for i, d := range page {
		ids[i], index[d.ID] = d.ID, i
		page[i].Tags = []string{}
	}
	var a store.Args
	type tagged struct{ device, tag string }
	tags, err := store.QueryAll(ctx, s.db, devices.SelectTags(&a, ids), a.Values(), func(sc store.Scanner) (t tagged, err error) {
		err = sc.Scan(&t.device, &t.tag)
		return t, err
	})
	if err != nil {
		return err
	}
	for _, t := range tags {
		page[index[t.device]].Tags = append(page[index[t.device]].Tags, t.tag)
	}
	return nil
}

type tagsInput struct {
	Search string `query:"search" maxLength:"200" doc:"Keep tags containing this text (case-insensitive)."`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" doc:"At most this many tags; default and maximum 1000."`
}

type tagsOutput struct{ Body TagList }

type taggedInput struct {
	httpapi.PageQuery
	Tag  string `query:"tag" maxLength:"100" doc:"Devices carrying this tag (exact match)."`
	Tags string `query:"tags" maxLength:"2000" doc:"Comma-separated tags; devices must carry all of them (and tag, if given)."`
}

func (s *Service) registerTags(api *httpapi.Server) {
	const tag = "Device groups and tags"
	httpapi.Register(api, httpapi.Route{ID: "list-tags", Method: http.MethodGet, Path: "/tags", Tag: tag,
		Permission: access.DevicesRead, Summary: "List device tags",
		Description: "Distinct tags of devices in scope (decommissioned devices excluded), by tag, with deviceCount. Not paged: at most limit tags, hasMore says whether more match."},
		func(ctx context.Context, in *tagsInput) (*tagsOutput, error) {
			l, err := s.Tags(ctx, in.Search, in.Limit)
			return &tagsOutput{l}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-tagged-devices", Method: http.MethodGet, Path: "/tags/devices", Tag: tag,
		Permission: access.DevicesRead, Summary: "Devices carrying tags",
		Description: "Devices in scope carrying tag (or every one of tags), by hostname. Cursor paging."},
		func(ctx context.Context, in *taggedInput) (*httpapi.ListBody[TaggedDevice], error) {
			tags, err := parseTags(in.Tag, in.Tags)
			if err != nil {
				return nil, err
			}
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.TaggedDevices(ctx, tags, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
}
