package partnerapi

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gale/internal/domains/enrollment"
	"gale/internal/platform/apperr"
	"gale/internal/platform/secrets"
)

// IdempotencyWindow is how long an X-Idempotency-Key is remembered after its first
// successful use; afterwards the same key mints a new enrollment key.
const IdempotencyWindow = 24 * time.Hour

// requestHash fingerprints a parsed request body (so formatting and field order do not
// matter).
func requestHash(body any) string {
	b, _ := json.Marshal(body)
	return secrets.Hash(string(b))
}

// claimIdempotencyKey records key for the request inside the minting transaction, before
// anything is minted. It returns nil when the key is new (or its record expired): the caller
// mints, then calls rememberAnswer. It returns the first answer when the same request was
// made with the key before, and 422 IDEMPOTENCY_KEY_REUSED when the body differs. The primary
// key settles concurrent duplicates: the second insert waits for the first transaction, then
// finds its committed record and replays it. Only successful answers are remembered, so a
// refused request (429, 400) can be retried with the same key.
func (s *Service) claimIdempotencyKey(ctx context.Context, tx *sql.Tx, principalID, key string, body any) (*enrollment.IssuedKey, error) {
	hash, now := requestHash(body), s.now()
	var claimed string
	err := tx.QueryRowContext(ctx, `INSERT INTO partner_api_idempotency (principal_id, key, request_hash, response, created_at, expires_at)
		VALUES ($1, $2, $3, NULL, $4, $5)
		ON CONFLICT (principal_id, key) DO UPDATE SET request_hash = excluded.request_hash, response = NULL,
			created_at = excluded.created_at, expires_at = excluded.expires_at
		WHERE partner_api_idempotency.expires_at <= excluded.created_at
		RETURNING principal_id`, principalID, key, hash, now, now.Add(IdempotencyWindow)).Scan(&claimed)
	if err == nil {
		return nil, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("claim idempotency key: %w", err)
	}
	var firstHash string
	var sealed sql.NullString
	if err := tx.QueryRowContext(ctx, `SELECT request_hash, response FROM partner_api_idempotency
		WHERE principal_id = $1 AND key = $2`, principalID, key).Scan(&firstHash, &sealed); err != nil {
		return nil, fmt.Errorf("read idempotency key: %w", err)
	}
	if firstHash != hash {
		return nil, &apperr.Error{Kind: apperr.KindUnprocessable, Code: CodeIdempotencyReused,
			Message: "this X-Idempotency-Key was used with a different request body in the last 24 hours; use a new key for a new request"}
	}
	if !sealed.Valid {
		return nil, apperr.ConflictCode(CodeIdempotencyPending, "a request with this X-Idempotency-Key is still being processed; retry shortly")
	}
	plain, err := s.box.Open(sealed.String)
	if err != nil {
		return nil, fmt.Errorf("open idempotent answer: %w", err)
	}
	var first enrollment.IssuedKey
	if err := json.Unmarshal([]byte(plain), &first); err != nil {
		return nil, fmt.Errorf("decode idempotent answer: %w", err)
	}
	return &first, nil
}

// rememberAnswer stores the answer of a claimed key, sealed with APP_ENCRYPTION_KEY: it holds
// the raw enrollment key (and secret), which are otherwise kept only as hashes.
func (s *Service) rememberAnswer(ctx context.Context, tx *sql.Tx, principalID, key string, answer enrollment.IssuedKey) error {
	b, err := json.Marshal(answer)
	if err != nil {
		return fmt.Errorf("encode the answer of idempotency key %s: %w", key, err)
	}
	_, err = tx.ExecContext(ctx, `UPDATE partner_api_idempotency SET response = $1 WHERE principal_id = $2 AND key = $3`,
		s.box.Seal(string(b)), principalID, key)
	if err != nil {
		return fmt.Errorf("store the answer of idempotency key %s: %w", key, err)
	}
	return nil
}
