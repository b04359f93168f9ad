package audit

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"gale/internal/platform/access"
)

// Export formats.
const (
	FormatCSV  = "csv"
	FormatJSON = "json"
)

// MaxExportRows caps one export; narrow the filters to export more in several parts.
const MaxExportRows = 100_000

// exportBatch is how many rows an export reads per query; memory stays flat at one batch.
const exportBatch = 500

// csvHeader names the CSV columns, in the order of csvRecord.
var csvHeader = []string{"id", "occurredAt", "partnerId", "orgId", "category", "result", "actorType", "actorId",
	"actorEmail", "action", "resourceType", "resourceId", "resourceName", "ip", "userAgent", "requestId", "details"}

// Export writes every entry in scope s that matches c (newest first, at most MaxExportRows)
// to w as CSV or JSON, reading the log in keyset batches. It returns the number of rows
// written. An error after the first byte leaves the output truncated; the caller can only log it.
func (l *Log) Export(ctx context.Context, s access.Scope, c Criteria, format string, w io.Writer) (int, error) {
	bw := bufio.NewWriterSize(w, 32<<10)
	var enc rowWriter
	if format == FormatJSON {
		enc = &jsonRows{w: bw}
	} else {
		enc = &csvRows{w: csv.NewWriter(bw)}
	}
	if err := enc.begin(); err != nil {
		return 0, err
	}
	n, before := 0, ""
	for n < MaxExportRows {
		limit := min(exportBatch, MaxExportRows-n)
		rows, err := l.batch(ctx, s, c, before, limit)
		if err != nil {
			return n, err
		}
		for _, e := range rows {
			if err := enc.row(e); err != nil {
				return n, err
			}
			n++
		}
		if err := enc.flush(); err != nil {
			return n, err
		}
		if err := bw.Flush(); err != nil {
			return n, err
		}
		if fl, ok := w.(interface{ Flush() }); ok {
			fl.Flush()
		}
		if len(rows) < limit {
			break
		}
		before = rows[len(rows)-1].ID
	}
	if err := enc.end(); err != nil {
		return n, err
	}
	if err := enc.flush(); err != nil {
		return n, err
	}
	return n, bw.Flush()
}

// ExportFilename is the attachment name of an export made at t.
func ExportFilename(format string, t time.Time) string {
	return "audit-log-" + t.UTC().Format("20060102T150405Z") + "." + format
}

type rowWriter interface {
	begin() error
	row(LogEntry) error
	end() error
	// flush hands buffered rows on to the underlying writer.
	flush() error
}

type csvRows struct{ w *csv.Writer }

func (c *csvRows) begin() error { return c.w.Write(csvHeader) }

func (c *csvRows) row(e LogEntry) error {
	details, err := json.Marshal(e.Details)
	if err != nil {
		return fmt.Errorf("encode details of %s: %w", e.ID, err)
	}
	rec := []string{e.ID, e.OccurredAt.UTC().Format(time.RFC3339Nano), str(e.PartnerID), str(e.OrgID), e.Category,
		e.Result, e.ActorType, str(e.ActorID), str(e.ActorEmail), e.Action, e.ResourceType, str(e.ResourceID),
		str(e.ResourceName), str(e.IP), str(e.UserAgent), str(e.RequestID), string(details)}
	for i, v := range rec {
		rec[i] = defuse(v)
	}
	return c.w.Write(rec)
}

func (c *csvRows) end() error { return nil }

func (c *csvRows) flush() error {
	c.w.Flush()
	return c.w.Error()
}

// defuse keeps a spreadsheet from running a cell as a formula: text that starts with one of
// = + - @ (or a tab or carriage return) gets a leading apostrophe. Resource names and emails
// come from users, and exports are opened in spreadsheets.
func defuse(v string) string {
	if v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		return "'" + v
	}
	return v
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

type jsonRows struct {
	w     *bufio.Writer
	wrote bool
}

func (j *jsonRows) begin() error {
	_, err := j.w.WriteString("[")
	return err
}

func (j *jsonRows) row(e LogEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode audit entry %s: %w", e.ID, err)
	}
	if j.wrote {
		if err := j.w.WriteByte(','); err != nil {
			return err
		}
	}
	j.wrote = true
	if err := j.w.WriteByte('\n'); err != nil {
		return err
	}
	_, err = j.w.Write(b)
	return err
}

func (j *jsonRows) flush() error { return nil }

func (j *jsonRows) end() error {
	_, err := j.w.WriteString("\n]\n")
	return err
}
