package enrollment

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gale/internal/platform/apperr"
	"gale/internal/platform/secrets"
)

// Claimed is what an enrolling agent's key grants: where the device goes.
type Claimed struct {
	KeyID     string
	PartnerID string
	OrgID     string
	// SiteID is the key's site; "" when the key names none.
	SiteID string
	// DeviceID is the pre-created device a provisioning key enrolls; "" otherwise.
	DeviceID string
}

// Claim validates a raw key and secret and counts one use, inside the caller's transaction
// (the one that creates the device, so a failed enrollment gives the use back).
// globalSecret is AGENT_ENROLLMENT_SECRET; when it is empty, keys without their own secret
// cannot enroll. An unknown, revoked, expired or used-up key is 401; a wrong secret 403.
func (s *Service) Claim(ctx context.Context, tx *sql.Tx, rawKey, rawSecret, globalSecret string) (Claimed, error) {
	var c Claimed
	var site, device, secretHash sql.NullString
	var maxUsage, used int
	var expires time.Time
	var revoked sql.NullTime
	err := tx.QueryRowContext(ctx, `SELECT k.id, k.partner_id, k.org_id, k.site_id, k.device_id, k.secret_hash, k.max_usage,
		k.usage_count, k.expires_at, k.revoked_at FROM enrollment_keys k WHERE k.key_hash = $1 AND `+liveOrg,
		secrets.Hash(rawKey)).Scan(&c.KeyID, &c.PartnerID, &c.OrgID, &site, &device, &secretHash, &maxUsage, &used, &expires, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return Claimed{}, apperr.Unauthorized("unknown enrollment key")
	}
	if err != nil {
		return Claimed{}, fmt.Errorf("look up enrollment key: %w", err)
	}
	c.SiteID, c.DeviceID = site.String, device.String
	now := s.clock.Now()
	switch status(revoked.Valid, expires, used, maxUsage, now) {
	case StatusRevoked:
		return Claimed{}, apperr.Unauthorized("enrollment key revoked")
	case StatusExpired:
		return Claimed{}, apperr.Unauthorized("enrollment key expired")
	case StatusUsedUp:
		return Claimed{}, errUsedUp()
	}
	if !secretMatches(secretHash, rawSecret, globalSecret) {
		return Claimed{}, apperr.Forbidden("wrong enrollment secret")
	}
	// The conditional update is the usage limit: of concurrent enrollments on any number of
	// nodes, only maxUsage get a row back.
	res, err := tx.ExecContext(ctx, `UPDATE enrollment_keys SET usage_count = usage_count + 1, last_used_at = $1
		WHERE id = $2 AND usage_count < max_usage AND revoked_at IS NULL AND expires_at > $1`, now, c.KeyID)
	if err != nil {
		return Claimed{}, fmt.Errorf("count use of enrollment key %s: %w", c.KeyID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return Claimed{}, errUsedUp()
	}
	return c, nil
}

func errUsedUp() error { return apperr.Unauthorized("enrollment key has no uses left") }

// secretMatches compares hashes in constant time. A key with its own secret accepts only
// that one; a key without accepts the global secret, if the server has one.
func secretMatches(stored sql.NullString, given, global string) bool {
	want := stored.String
	if !stored.Valid {
		if global == "" {
			return false
		}
		want = secrets.Hash(global)
	}
	return subtle.ConstantTimeCompare([]byte(want), []byte(secrets.Hash(given))) == 1
}

// MintForDevice creates a single-use key with its own secret bound to a pre-created device,
// inside the caller's transaction, and returns its raw values. Its lifetime is ttl, clamped
// to the organization's cap.
func (s *Service) MintForDevice(ctx context.Context, tx *sql.Tx, partnerID, orgID, siteID, deviceID string, ttl time.Duration) (rawKey, rawSecret string, keyID string, err error) {
	expires, err := s.Expiry(ctx, tx, orgID, nil, nil, Policy{DefaultTTL: ttl})
	if err != nil {
		return "", "", "", err
	}
	c, err := s.insert(ctx, tx, keyRow{partnerID: partnerID, orgID: orgID, siteID: siteID, deviceID: deviceID,
		name: "Provisioned device " + deviceID, maxUsage: 1, expires: expires, withSecret: true, source: SourceProvision})
	if err != nil {
		return "", "", "", err
	}
	return c.Key, c.EnrollmentSecret, c.ID, nil
}

// RevokeForDevice revokes, as of at, the keys bound to a device (its provisioning keys) that
// are not revoked yet, inside the caller's transaction: the device is being decommissioned.
func (s *Service) RevokeForDevice(ctx context.Context, tx *sql.Tx, deviceID string, at time.Time) error {
	_, err := tx.ExecContext(ctx, `UPDATE enrollment_keys SET revoked_at = $1, updated_at = $1 WHERE device_id = $2 AND revoked_at IS NULL`,
		at, deviceID)
	if err != nil {
		return fmt.Errorf("revoke the enrollment keys of device %s: %w", deviceID, err)
	}
	return nil
}
