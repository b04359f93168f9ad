package software

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"

	"gale/internal/domains/devices"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/blob"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
)

// SoftwareUpload describes an uploaded file's version (the query of a raw upload).
type SoftwareUpload struct {
	Version     string
	FileType    string
	SilentArgs  string
	SupportedOS []string
}

// blobKey is where an uploaded file of a version is kept: under its partner, so that a
// listing of one tenant's blobs holds only its own.
func blobKey(partnerID, versionID string) string { return "software/" + partnerID + "/" + versionID }

// Upload adds a version whose file is the raw body: it streams into blob storage, its size
// and SHA-256 computed on the way, and the version is recorded once the file is stored. A
// failed upload stores nothing.
func (s *Service) Upload(ctx context.Context, itemID string, in SoftwareUpload, body httpapi.RawBody) (SoftwareVersion, error) {
	scope := access.ScopeFrom(ctx)
	it, err := manageable(ctx, s.db, scope, itemID)
	if err != nil {
		return SoftwareVersion{}, err
	}
	spec, err := checkVersion(it, in.Version, in.FileType, in.SilentArgs, "", in.SupportedOS)
	if err != nil {
		return SoftwareVersion{}, err
	}
	// Refuse a taken version before reading a possibly large body for nothing.
	var taken bool
	if err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM software_versions WHERE catalog_id = $1 AND version = $2)`,
		it.ID, spec.Version).Scan(&taken); err != nil {
		return SoftwareVersion{}, fmt.Errorf("check version: %w", err)
	}
	if taken {
		return SoftwareVersion{}, versionTaken(spec.Version)
	}
	id := store.NewID()
	key := blobKey(it.PartnerID, id)
	info, err := s.blobs.Put(ctx, key, body.Reader, "application/octet-stream")
	if err != nil {
		if ae, ok := apperr.As(err); ok {
			return SoftwareVersion{}, ae
		}
		if errors.Is(err, blob.ErrTooLarge) {
			return SoftwareVersion{}, &apperr.Error{Kind: apperr.KindTooLarge, Code: apperr.CodeTooLarge,
				Message: "the file is larger than the blob storage accepts"}
		}
		return SoftwareVersion{}, fmt.Errorf("store uploaded file: %w", err)
	}
	if info.Size == 0 {
		_ = s.blobs.Delete(context.WithoutCancel(ctx), key)
		return SoftwareVersion{}, apperr.Invalid("body", "the file is empty")
	}
	var out SoftwareVersion
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		it, err := manageable(ctx, tx, scope, itemID)
		if err != nil {
			return err
		}
		out, err = s.insertVersion(ctx, tx, it, id, spec, "", key, info.SHA256, &info.Size)
		return err
	})
	if err != nil {
		if derr := s.blobs.Delete(context.WithoutCancel(ctx), key); derr != nil {
			s.logger.ErrorContext(ctx, "the file of a version that was not recorded stays in blob storage", "key", key, "error", derr)
		}
		return SoftwareVersion{}, fmt.Errorf("upload software version: %w", err)
	}
	return out, nil
}

// agentFilePath is the server path an agent downloads an uploaded file of a version from.
func agentFilePath(deviceID, versionID string) string {
	return "/api/v1/agents/" + deviceID + "/software/" + versionID + "/file"
}

// AgentFile opens the uploaded file of a version for the agent of a device, which must have
// a software_install command of that version not yet ended: an agent fetches only what it
// was told to install, never another tenant's files. Anything else is 404.
func (s *Service) AgentFile(ctx context.Context, authorization, agentID, versionID string) (io.ReadCloser, blob.Info, error) {
	token := ""
	if len(authorization) > 7 && strings.EqualFold(authorization[:7], "bearer ") {
		token = strings.TrimSpace(authorization[7:])
	}
	a, err := s.devices.AuthenticateAgent(ctx, token)
	if err != nil {
		return nil, blob.Info{}, err
	}
	if a.DeviceID != agentID {
		return nil, blob.Info{}, apperr.Forbidden("the token belongs to another device")
	}
	notFound := apperr.NotFound("file")
	if !store.ValidID(versionID) {
		return nil, blob.Info{}, notFound
	}
	var key sql.NullString
	err = s.db.QueryRowContext(ctx, `SELECT v.blob_key FROM software_deployment_devices r JOIN software_versions v ON v.id = r.version_id`+
		devices.CommandJoin("r.command_id")+` WHERE r.device_id = $1 AND r.version_id = $2 AND c.device_id = $1 AND c.status IN ($3, $4)
		LIMIT 1`, a.DeviceID, versionID, devices.CommandQueued, devices.CommandSent).Scan(&key)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !key.Valid) {
		return nil, blob.Info{}, notFound
	}
	if err != nil {
		return nil, blob.Info{}, fmt.Errorf("check the file of version %s: %w", versionID, err)
	}
	rd, info, err := s.blobs.Open(ctx, key.String)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, blob.Info{}, notFound
	}
	return rd, info, err
}
