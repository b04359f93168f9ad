package remote

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gale/internal/domains/systemtools"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// Transfer directions, as the audit log records them.
const (
	directionDownload = "download"
	directionUpload   = "upload"
)

// transferSession returns the file_transfer session in scope that has not ended, for a
// transfer: a pending session becomes active with its first transfer.
func (s *Service) transferSession(ctx context.Context, id string) (RemoteSession, error) {
	x, err := s.activeSession(ctx, id, TypeFileTransfer)
	if err != nil {
		return x, err
	}
	if x.Status == StatusActive {
		// A transfer keeps its session from being idle.
		return x, s.db.Write(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `UPDATE remote_sessions SET updated_at = $1 WHERE id = $2 AND status = $3`,
				s.clock.Now(), x.ID, StatusActive); err != nil {
				return fmt.Errorf("mark remote session %s used: %w", x.ID, err)
			}
			return nil
		})
	}
	active, err := s.change(ctx, access.ScopeFrom(ctx), id, []string{StatusPending}, StatusActive, func(ch *store.Changes, now time.Time) {
		ch.Set("started_at", now)
	})
	if apperr.IsCode(err, CodeSessionState) {
		// A concurrent first transfer made it active.
		return s.activeSession(ctx, id, TypeFileTransfer)
	}
	return active, err
}

// transferOptions are the system tools' options of a transfer of session x: the size cap,
// and what its audit entry records besides the path and size.
func (s *Service) transferOptions(x RemoteSession, direction string) systemtools.TransferOptions {
	return systemtools.TransferOptions{MaxBytes: s.opts.FileTransferMaxBytes,
		Audit: map[string]any{"remoteSessionId": x.ID, "direction": direction}}
}

// DownloadFile streams the file at path of the session's device to the caller, through the
// agent's file stream; a file larger than FileTransferMaxBytes is 413.
func (s *Service) DownloadFile(ctx context.Context, id, path string) (*systemtools.DownloadOutput, error) {
	x, err := s.transferSession(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.files.Download(ctx, x.DeviceID, path, s.transferOptions(x, directionDownload))
}

// UploadFile writes body to the file at path of the session's device, streamed to the agent
// as it arrives, and answers the new file's entry. The route takes raw bodies of at most
// FileTransferMaxBytes: a larger declared length is 413 before this runs, and a body that
// passes it fails its reader with 413, upon which the agent keeps nothing.
func (s *Service) UploadFile(ctx context.Context, id, path string, body httpapi.RawBody, mode string, overwrite bool) (agentproto.FileEntry, error) {
	x, err := s.transferSession(ctx, id)
	if err != nil {
		return agentproto.FileEntry{}, err
	}
	opts := s.transferOptions(x, directionUpload)
	opts.Mode, opts.Overwrite = mode, overwrite
	return s.files.Upload(ctx, x.DeviceID, path, body, opts)
}

// UploadFileBase64 is UploadFile for a file sent in base64 (a JSON body, at most 50 MiB).
func (s *Service) UploadFileBase64(ctx context.Context, id, path, content, mode string, overwrite bool) (agentproto.FileEntry, error) {
	x, err := s.transferSession(ctx, id)
	if err != nil {
		return agentproto.FileEntry{}, err
	}
	opts := s.transferOptions(x, directionUpload)
	opts.Mode, opts.Overwrite = mode, overwrite
	return s.files.UploadBase64(ctx, x.DeviceID, path, content, opts)
}
