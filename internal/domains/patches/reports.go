package patches

import (
	"context"
	"database/sql"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

const (
	// reportPoll is how often each node looks for queued reports (sooner when one was queued
	// on it).
	reportPoll = 5 * time.Second
	// reportStale is how long a running report may go without progress before another node
	// takes it over (its node stopped).
	reportStale = 10 * time.Minute
	// progressEvery is how many rows are written between progress updates.
	progressEvery = 5000
)

const reportColumns = `r.id, r.org_id, r.format, r.status, r.progress, r.size_bytes, r.error, r.created_by_email, r.created_at,
	r.started_at, r.completed_at`

func scanReport(row store.Scanner) (PatchReport, error) {
	var r PatchReport
	var org, errMsg, by sql.NullString
	var size sql.NullInt64
	var started, done sql.NullTime
	err := row.Scan(&r.ID, &org, &r.Format, &r.Status, &r.Progress, &size, &errMsg, &by, &r.CreatedAt, &started, &done)
	r.OrgID, r.Error, r.CreatedBy = store.StringPtr(org), store.StringPtr(errMsg), store.StringPtr(by)
	r.StartedAt, r.CompletedAt = store.TimePtr(started), store.TimePtr(done)
	if size.Valid {
		r.SizeBytes = &size.Int64
	}
	return r, err
}

// QueueReport queues a compliance report of the caller's partner, or of one organization.
func (s *Service) QueueReport(ctx context.Context, in PatchReportRequest) (PatchReport, error) {
	if in.Format != FormatCSV && in.Format != FormatPDF {
		return PatchReport{}, apperr.Invalid("format", "format must be csv or pdf")
	}
	var r PatchReport
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		pl, err := tenancy.Place(ctx, tx, access.ScopeFrom(ctx), in.OrgID, tenancy.PlaceOptions{Noun: "report", PartnerWide: true,
			PartnerWideRefused: apperr.Forbidden("a partner-wide report covers every organization of the partner; name one (orgId)")})
		if err != nil {
			return err
		}
		by, email := actor(ctx)
		id, now := store.NewID(), s.clock.Now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO patch_reports (id, partner_id, org_id, format, status, created_by, created_by_email,
			created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)`, id, pl.PartnerID, store.NullIfEmpty(pl.OrgID), in.Format,
			ReportQueued, by, email, now); err != nil {
			return fmt.Errorf("insert patch report: %w", err)
		}
		r, err = getReport(ctx, tx, access.Scope{Level: access.LevelSystem}, id)
		return err
	})
	if err != nil {
		return r, fmt.Errorf("queue a patch report: %w", err)
	}
	s.reports.Wake()
	return r, nil
}

func reportFilter(scope access.Scope, a *store.Args) string {
	return tenancy.SharedRowsFilter(scope, a, "r.org_id", "r.partner_id")
}

func getReport(ctx context.Context, q store.Querier, scope access.Scope, id string) (PatchReport, error) {
	var a store.Args
	return store.ByID(ctx, q, "report", `SELECT `+reportColumns+` FROM patch_reports r`, "r.id", id, &a,
		[]string{reportFilter(scope, &a)}, scanReport)
}

// GetReport returns a report in scope.
func (s *Service) GetReport(ctx context.Context, id string) (PatchReport, error) {
	return getReport(ctx, s.db, access.ScopeFrom(ctx), id)
}

// ListReports lists the reports in scope, newest first.
func (s *Service) ListReports(ctx context.Context, page store.Page) ([]PatchReport, string, *int, error) {
	var a store.Args
	return store.List(ctx, s.db, store.ListQuery{Columns: reportColumns, From: " FROM patch_reports r",
		Conds: []string{reportFilter(access.ScopeFrom(ctx), &a)}, Args: &a, SortKey: "r.id", SortID: "r.id", Desc: true}, page, scanReport,
		func(r PatchReport) (string, string) { return r.ID, r.ID })
}

// ReportFile opens a completed report's file; before it is completed, 409 REPORT_NOT_READY.
func (s *Service) ReportFile(ctx context.Context, id string) (PatchReport, io.ReadCloser, error) {
	r, err := s.GetReport(ctx, id)
	if err != nil {
		return r, nil, err
	}
	if r.Status != ReportCompleted {
		return r, nil, apperr.ConflictCode("REPORT_NOT_READY", "the report is "+r.Status+"; download it once completed")
	}
	var key string
	if err := s.db.QueryRowContext(ctx, `SELECT blob_key FROM patch_reports WHERE id = $1`, id).Scan(&key); err != nil {
		return r, nil, fmt.Errorf("read the file of report %s: %w", id, err)
	}
	rc, _, err := s.blobs.Open(ctx, key)
	if err != nil {
		return r, nil, fmt.Errorf("open the file of report %s: %w", id, err)
	}
	return r, rc, nil
}

// StartReports runs this node's report builder until StopReports.
func (s *Service) StartReports(ctx context.Context) { s.reports.Start(ctx) }

// StopReports stops the report builder and waits for it.
func (s *Service) StopReports() { s.reports.Stop() }

// buildReports builds the queued reports one after another until none is left.
func (s *Service) buildReports(ctx context.Context) error {
	for {
		built, err := s.BuildNextReport(ctx)
		if err != nil || !built {
			return err
		}
	}
}

// BuildNextReport claims the oldest queued report (or one whose node stopped building it)
// and builds it. The conditional claim lets one node alone take a report. It reports whether
// there was one.
func (s *Service) BuildNextReport(ctx context.Context) (bool, error) {
	now := s.clock.Now()
	stale := now.Add(-reportStale)
	var id, partnerID, format string
	var orgID sql.NullString
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `UPDATE patch_reports SET status = $1, started_at = $2, updated_at = $2, progress = 0
			WHERE id = (SELECT id FROM patch_reports WHERE status = $3 OR (status = $1 AND updated_at < $4) ORDER BY created_at LIMIT 1)
			AND (status = $3 OR (status = $1 AND updated_at < $4)) RETURNING id, partner_id, org_id, format`,
			ReportRunning, now, ReportQueued, stale).Scan(&id, &partnerID, &orgID, &format)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim a patch report: %w", err)
	}
	key := "patch-reports/" + partnerID + "/" + id + "." + format
	size, err := s.buildReport(ctx, id, partnerID, orgID.String, format, key)
	status, errMsg := ReportCompleted, any(nil)
	var sizeArg any = size
	if err != nil {
		status, errMsg, sizeArg = ReportFailed, err.Error(), nil
		s.logger.ErrorContext(ctx, "patch report failed", "reportId", id, "error", err)
	}
	done := s.clock.Now()
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE patch_reports SET status = $1, error = $2, size_bytes = $3, blob_key = $4, updated_at = $5,
			completed_at = $5 WHERE id = $6 AND status = $7`, status, errMsg, sizeArg, key, done, id, ReportRunning)
		return err
	})
	if err != nil {
		return true, fmt.Errorf("record the end of patch report %s: %w", id, err)
	}
	return true, nil
}

// reportRow is one device of a report.
type reportRow struct {
	orgID, siteID, hostname              string
	pending, critical, installed, failed int
	lastScan                             sql.NullTime
	scanned                              bool
}

// buildReport writes the report's file to a temporary file, one row per live device of the
// partner (or organization), then stores it in blob storage.
func (s *Service) buildReport(ctx context.Context, id, partnerID, orgID, format, key string) (int64, error) {
	f, err := os.CreateTemp("", "patch-report-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	var row func(r reportRow, org, site string) error
	var finish func() error
	header := []string{"organization", "site", "hostname", "pending", "critical pending", "installed", "failed", "compliance %", "last scan"}
	if format == FormatPDF {
		pw := newPDFWriter(f)
		pw.Line("Patch compliance report, " + s.clock.Now().Format(time.RFC3339))
		pw.Line("")
		line := func(cols []string) string {
			return fmt.Sprintf("%-24.24s %-16.16s %-32.32s %8s %8s %9s %6s %12s %-20s", cols[0], cols[1], cols[2], cols[3], cols[4], cols[5],
				cols[6], cols[7], cols[8])
		}
		pw.Line(line(header))
		row = func(r reportRow, org, site string) error { pw.Line(line(reportCells(r, org, site))); return nil }
		finish = pw.Close
	} else {
		cw := csv.NewWriter(f)
		if err := cw.Write(header); err != nil {
			return 0, err
		}
		row = func(r reportRow, org, site string) error { return cw.Write(reportCells(r, org, site)) }
		finish = func() error { cw.Flush(); return cw.Error() }
	}
	if err := s.reportRows(ctx, id, partnerID, orgID, row); err != nil {
		return 0, err
	}
	if err := finish(); err != nil {
		return 0, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	contentType := "text/csv"
	if format == FormatPDF {
		contentType = "application/pdf"
	}
	info, err := s.blobs.Put(ctx, key, f, contentType)
	if err != nil {
		return 0, fmt.Errorf("store report %s: %w", id, err)
	}
	return info.Size, nil
}

func reportCells(r reportRow, org, site string) []string {
	last := "never"
	if r.lastScan.Valid {
		last = r.lastScan.Time.UTC().Format(time.RFC3339)
	}
	pct := ""
	if r.scanned {
		pct = strconv.FormatFloat(percent(r.installed, r.pending), 'f', 2, 64)
	}
	return []string{org, site, r.hostname, strconv.Itoa(r.pending), strconv.Itoa(r.critical), strconv.Itoa(r.installed),
		strconv.Itoa(r.failed), pct, last}
}

// reportRows reads the devices of a report in keyset pages and hands each row to fn with its
// organization's and site's names, recording the progress as it goes.
func (s *Service) reportRows(ctx context.Context, id, partnerID, orgID string, fn func(r reportRow, org, site string) error) error {
	type place struct{ org, site string }
	type device struct {
		id string
		reportRow
	}
	names := map[place]place{}
	after, written := "", 0
	for {
		var a store.Args
		conds := []string{"d.partner_id = " + a.Add(partnerID), tenancy.LiveOrg("d.org_id")}
		if orgID != "" {
			conds = append(conds, "d.org_id = "+a.Add(orgID))
		}
		if after != "" {
			conds = append(conds, "d.id > "+a.Add(after))
		}
		page, err := store.QueryAll(ctx, s.db, devices.SelectLive(`d.id, d.org_id, d.site_id, d.hostname, s.device_id IS NOT NULL,
			COALESCE(s.pending, 0), COALESCE(s.critical_pending, 0), COALESCE(s.installed, 0), COALESCE(s.failed, 0), s.last_scan_at`,
			summariesJoin, conds...)+` ORDER BY d.id LIMIT 5000`, a.Values(), func(sc store.Scanner) (d device, err error) {
			err = sc.Scan(&d.id, &d.orgID, &d.siteID, &d.hostname, &d.scanned, &d.pending, &d.critical, &d.installed, &d.failed,
				&d.lastScan)
			return d, err
		})
		if err != nil {
			return fmt.Errorf("read the devices of report %s: %w", id, err)
		}
		if len(page) > 0 {
			after = page[len(page)-1].id
		}
		for _, d := range page {
			r := d.reportRow
			k := place{r.orgID, r.siteID}
			n, ok := names[k]
			if !ok {
				if n.org, n.site, err = s.tenancy.Names(ctx, r.orgID, r.siteID); err != nil {
					return fmt.Errorf("read the names of organization %s and site %s: %w", r.orgID, r.siteID, err)
				}
				names[k] = n
			}
			if err := fn(r, n.org, n.site); err != nil {
				return err
			}
		}
		written += len(page)
		if len(page) > 0 && (written%progressEvery == 0 || len(page) < 5000) {
			if err := s.db.Write(ctx, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `UPDATE patch_reports SET progress = $1, updated_at = $2 WHERE id = $3`, written, s.clock.Now(), id)
				return err
			}); err != nil {
				return fmt.Errorf("record the progress of report %s: %w", id, err)
			}
		}
		if len(page) < 5000 {
			return nil
		}
	}
}
