package identity

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Access review and item states.
const (
	ReviewInProgress = "in_progress"
	ReviewCompleted  = "completed"

	DecisionPending = "pending"
	DecisionKeep    = "keep"
	DecisionRevoke  = "revoke"
)

// AccessReview is the API view of an access review.
type AccessReview struct {
	ID           string       `json:"id" format:"uuid"`
	Name         string       `json:"name"`
	Description  string       `json:"description"`
	Status       string       `json:"status" enum:"in_progress,completed"`
	Scope        access.Level `json:"scope" enum:"system,partner,organization" doc:"The level of the tenant that ran the review."`
	PartnerID    *string      `json:"partnerId"`
	OrgID        *string      `json:"orgId"`
	DueAt        *time.Time   `json:"dueAt"`
	CreatedBy    *string      `json:"createdBy"`
	CreatedAt    time.Time    `json:"createdAt"`
	CompletedAt  *time.Time   `json:"completedAt"`
	CompletedBy  *string      `json:"completedBy"`
	ItemCount    int          `json:"itemCount"`
	PendingCount int          `json:"pendingCount"`
	// Items is set on the single-review view.
	Items []AccessReviewItem `json:"items,omitempty"`
}

// AccessReviewItem is one user's access as the review snapshotted it, and the decision.
type AccessReviewItem struct {
	ID        string     `json:"id" format:"uuid"`
	UserID    string     `json:"userId" format:"uuid"`
	UserEmail string     `json:"userEmail"`
	UserName  string     `json:"userName"`
	RoleID    string     `json:"roleId" format:"uuid"`
	RoleName  string     `json:"roleName"`
	PartnerID *string    `json:"partnerId"`
	OrgID     *string    `json:"orgId"`
	OrgAccess string     `json:"orgAccess"`
	Decision  string     `json:"decision" enum:"pending,keep,revoke"`
	Note      string     `json:"note"`
	DecidedBy *string    `json:"decidedBy"`
	DecidedAt *time.Time `json:"decidedAt"`
	AppliedAt *time.Time `json:"appliedAt" doc:"When a revoke decision was carried out (at completion)."`
}

// NewAccessReview is a create request.
type NewAccessReview struct {
	Name        string     `json:"name" minLength:"1" maxLength:"200"`
	Description string     `json:"description,omitempty" maxLength:"2000" multiline:"true"`
	DueAt       *time.Time `json:"dueAt,omitempty"`
}

// Decision is a reviewer's verdict on one item.
type Decision struct {
	Decision string `json:"decision" enum:"keep,revoke"`
	Note     string `json:"note,omitempty" maxLength:"2000" multiline:"true"`
}

const reviewColumns = `ar.id, ar.name, ar.description, ar.status, ar.scope, ar.partner_id, ar.org_id, ar.due_at, ar.created_by,
	ar.created_at, ar.completed_at, ar.completed_by,
	(SELECT COUNT(*) FROM access_review_items i WHERE i.review_id = ar.id),
	(SELECT COUNT(*) FROM access_review_items i WHERE i.review_id = ar.id AND i.decision = 'pending')`

func scanReview(row scanner) (AccessReview, error) {
	var r AccessReview
	var partnerID, orgID, createdBy, completedBy sql.NullString
	var due, completed sql.NullTime
	err := row.Scan(&r.ID, &r.Name, &r.Description, &r.Status, &r.Scope, &partnerID, &orgID, &due, &createdBy, &r.CreatedAt,
		&completed, &completedBy, &r.ItemCount, &r.PendingCount)
	if err != nil {
		return r, err
	}
	r.PartnerID, r.OrgID, r.CreatedBy, r.CompletedBy = store.StringPtr(partnerID), store.StringPtr(orgID), store.StringPtr(createdBy), store.StringPtr(completedBy)
	r.DueAt, r.CompletedAt = store.TimePtr(due), store.TimePtr(completed)
	return r, nil
}

const itemColumns = `i.id, i.user_id, i.user_email, i.user_name, i.role_id, i.role_name, i.partner_id, i.org_id, i.org_access,
	i.decision, i.note, i.decided_by, i.decided_at, i.applied_at`

func scanItem(row scanner) (AccessReviewItem, error) {
	var it AccessReviewItem
	var partnerID, orgID, decidedBy sql.NullString
	var decided, applied sql.NullTime
	err := row.Scan(&it.ID, &it.UserID, &it.UserEmail, &it.UserName, &it.RoleID, &it.RoleName, &partnerID, &orgID, &it.OrgAccess,
		&it.Decision, &it.Note, &decidedBy, &decided, &applied)
	if err != nil {
		return it, err
	}
	it.PartnerID, it.OrgID, it.DecidedBy = store.StringPtr(partnerID), store.StringPtr(orgID), store.StringPtr(decidedBy)
	it.DecidedAt, it.AppliedAt = store.TimePtr(decided), store.TimePtr(applied)
	return it, nil
}

// reviewFilter renders the condition keeping access reviews (alias ar) the scope may see: a
// partner sees its partner-level reviews and those of organizations it reaches; an
// organization its own.
func reviewFilter(scope access.Scope, a *store.Args) string {
	if scope.IsSystem() {
		return "TRUE"
	}
	return "((ar.org_id IS NULL AND " + scope.PartnerFilter(a, "ar.partner_id") + ") OR (ar.org_id IS NOT NULL AND " +
		scope.OrgFilter(a, "ar.org_id", "ar.partner_id") + "))"
}

// ListAccessReviews lists the reviews in scope, newest first.
func (s *Service) ListAccessReviews(ctx context.Context, status string, page store.Page) ([]AccessReview, string, *int, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	conds := []string{reviewFilter(p.Scope, &a)}
	if status != "" {
		conds = append(conds, "ar.status = "+a.Add(status))
	}
	// IDs are time-ordered: sorting by ID alone is newest first.
	return store.List(ctx, s.db, store.ListQuery{Columns: reviewColumns, From: ` FROM access_reviews ar`, Conds: conds, Args: &a,
		SortKey: "ar.id", SortID: "ar.id", Desc: true}, page, scanReview,
		func(r AccessReview) (string, string) { return r.ID, r.ID })
}

// GetAccessReview returns a review in scope with its items.
func (s *Service) GetAccessReview(ctx context.Context, id string) (AccessReview, error) {
	p, err := caller(ctx)
	if err != nil {
		return AccessReview{}, err
	}
	return getReview(ctx, s.db, p.Scope, id)
}

func getReview(ctx context.Context, q store.Querier, scope access.Scope, id string) (AccessReview, error) {
	var a store.Args
	r, err := store.ByID(ctx, q, "access review", `SELECT `+reviewColumns+` FROM access_reviews ar`, "ar.id", id, &a,
		[]string{reviewFilter(scope, &a)}, scanReview)
	if err != nil {
		return r, err
	}
	r.Items, err = store.QueryAll(ctx, q, `SELECT `+itemColumns+` FROM access_review_items i WHERE i.review_id = $1
		ORDER BY i.user_email, i.id`, []any{id}, scanItem)
	if err != nil {
		return r, fmt.Errorf("load items of access review %s: %w", id, err)
	}
	return r, nil
}

// CreateAccessReview starts a review of every user in the caller's scope that is not
// disabled, snapshotting each one's role and reach as an item to decide.
func (s *Service) CreateAccessReview(ctx context.Context, in NewAccessReview) (AccessReview, error) {
	p, err := caller(ctx)
	if err != nil {
		return AccessReview{}, err
	}
	name := strings.TrimSpace(in.Name)
	if name == "" {
		return AccessReview{}, apperr.Invalid("name", "name is required")
	}
	var r AccessReview
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		id, now := store.NewID(), s.clock.Now()
		var due any
		if in.DueAt != nil {
			due = in.DueAt.UTC()
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO access_reviews (id, partner_id, org_id, scope, name, description, status, due_at,
			created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, 'in_progress', $7, $8, $9)`,
			id, store.NullIfEmpty(p.Scope.PartnerID), store.NullIfEmpty(p.Scope.OrgID), string(p.Scope.Level), name, in.Description, due,
			store.NullIfEmpty(p.UserID), now)
		if err != nil {
			return fmt.Errorf("insert access review: %w", err)
		}
		if err := snapshotItems(ctx, tx, p.Scope, id); err != nil {
			return err
		}
		if r, err = getReview(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "access_review.create", ResourceType: "access_review", ResourceID: id,
			ResourceName: name, PartnerID: p.Scope.PartnerID, OrgID: p.Scope.OrgID,
			Details: map[string]any{"itemCount": r.ItemCount, "dueAt": in.DueAt}})
	})
	if err != nil {
		return r, fmt.Errorf("create access review: %w", err)
	}
	return r, nil
}

// snapshotItems adds one pending item per user in scope that is not disabled.
func snapshotItems(ctx context.Context, tx *sql.Tx, scope access.Scope, reviewID string) error {
	type item struct {
		userID, email, name, roleID, roleName, orgAccess string
		partnerID, orgID                                 sql.NullString
	}
	var a store.Args
	items, err := store.QueryAll(ctx, tx, `SELECT u.id, u.email, u.name, u.role_id, r.name, u.partner_id, u.org_id, u.org_access`+
		userFrom+` WHERE u.status <> 'disabled' AND `+UserFilter(scope, &a)+` ORDER BY u.email`, a.Values(),
		func(row store.Scanner) (item, error) {
			var it item
			err := row.Scan(&it.userID, &it.email, &it.name, &it.roleID, &it.roleName, &it.partnerID, &it.orgID, &it.orgAccess)
			return it, err
		})
	if err != nil {
		return fmt.Errorf("list the users to review: %w", err)
	}
	for _, it := range items {
		_, err := tx.ExecContext(ctx, `INSERT INTO access_review_items (id, review_id, user_id, user_email, user_name, role_id,
			role_name, partner_id, org_id, org_access, decision, note) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'pending', '')`,
			store.NewID(), reviewID, it.userID, it.email, it.name, it.roleID, it.roleName, it.partnerID, it.orgID, it.orgAccess)
		if err != nil {
			return fmt.Errorf("add user %s to access review %s: %w", it.userID, reviewID, err)
		}
	}
	return nil
}

// DecideItem records keep or revoke on an item of a review still in progress (409 after
// completion). Revocations take effect when the review completes.
func (s *Service) DecideItem(ctx context.Context, reviewID, itemID string, d Decision) (AccessReviewItem, error) {
	p, err := caller(ctx)
	if err != nil {
		return AccessReviewItem{}, err
	}
	if d.Decision != DecisionKeep && d.Decision != DecisionRevoke {
		return AccessReviewItem{}, apperr.Invalid("decision", "use keep or revoke")
	}
	var it AccessReviewItem
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		r, err := getReview(ctx, tx, p.Scope, reviewID)
		if err != nil {
			return err
		}
		var before *AccessReviewItem
		for i := range r.Items {
			if r.Items[i].ID == itemID {
				before = &r.Items[i]
			}
		}
		if before == nil {
			return apperr.NotFound("access review item")
		}
		if r.Status != ReviewInProgress {
			return apperr.Conflict("the access review is completed; its decisions can no longer change")
		}
		if d.Decision == DecisionRevoke && before.UserID == p.UserID {
			return apperr.Forbidden("you cannot revoke your own access")
		}
		now := s.clock.Now()
		res, err := tx.ExecContext(ctx, `UPDATE access_review_items SET decision = $1, note = $2, decided_by = $3, decided_at = $4
			WHERE id = $5 AND review_id = $6 AND EXISTS (SELECT 1 FROM access_reviews WHERE id = $6 AND status = 'in_progress')`,
			d.Decision, d.Note, store.NullIfEmpty(p.UserID), now, itemID, reviewID)
		if err != nil {
			return fmt.Errorf("decide item %s of access review %s: %w", itemID, reviewID, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return apperr.Conflict("the access review is completed; its decisions can no longer change")
		}
		if it, err = scanItem(tx.QueryRowContext(ctx, `SELECT `+itemColumns+` FROM access_review_items i WHERE i.id = $1`, itemID)); err != nil {
			return fmt.Errorf("load access review item %s: %w", itemID, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "access_review.decide", ResourceType: "access_review", ResourceID: reviewID,
			ResourceName: r.Name, PartnerID: store.Deref(r.PartnerID), OrgID: store.Deref(r.OrgID), Details: map[string]any{
				"itemId": itemID, "userId": it.UserID, "userEmail": it.UserEmail, "decision": it.Decision, "note": it.Note}})
	})
	if err != nil {
		return it, fmt.Errorf("decide access review item: %w", err)
	}
	return it, nil
}

// CompleteAccessReview closes a review whose items are all decided and carries out every
// revoke: the user is disabled and its sessions end. Each revocation and the completion
// are audited. A second completion, concurrent or not, gets 409.
func (s *Service) CompleteAccessReview(ctx context.Context, id string) (AccessReview, error) {
	p, err := caller(ctx)
	if err != nil {
		return AccessReview{}, err
	}
	var r AccessReview
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := getReview(ctx, tx, p.Scope, id)
		if err != nil {
			return err
		}
		if before.Status != ReviewInProgress {
			return apperr.Conflict("the access review is already completed")
		}
		if before.PendingCount > 0 {
			return apperr.Conflict(itoa(before.PendingCount) + " item(s) still need a decision")
		}
		now := s.clock.Now()
		res, err := tx.ExecContext(ctx, `UPDATE access_reviews SET status = 'completed', completed_at = $1, completed_by = $2
			WHERE id = $3 AND status = 'in_progress'`, now, store.NullIfEmpty(p.UserID), id)
		if err != nil {
			return fmt.Errorf("complete access review %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return apperr.Conflict("the access review is already completed")
		}
		revoked := 0
		for _, it := range before.Items {
			if it.Decision != DecisionRevoke || it.AppliedAt != nil {
				continue
			}
			if err := s.applyRevoke(ctx, tx, p, before, it, now); err != nil {
				return err
			}
			revoked++
		}
		if r, err = getReview(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "access_review.complete", ResourceType: "access_review", ResourceID: id,
			ResourceName: r.Name, PartnerID: store.Deref(r.PartnerID), OrgID: store.Deref(r.OrgID),
			Details: map[string]any{"itemCount": r.ItemCount, "revoked": revoked}})
	})
	if err != nil {
		return r, fmt.Errorf("complete access review: %w", err)
	}
	return r, nil
}

// applyRevoke disables the user of a revoke decision (when it still exists in the caller's
// scope and is not already disabled) and marks the item applied.
func (s *Service) applyRevoke(ctx context.Context, tx *sql.Tx, p *access.Principal, r AccessReview, it AccessReviewItem, now time.Time) error {
	outcome := "disabled"
	u, err := getUser(ctx, tx, p.Scope, it.UserID)
	switch {
	case apperr.IsCode(err, apperr.CodeNotFound):
		outcome = "user_gone"
	case err != nil:
		return err
	case u.Status == StatusDisabled:
		outcome = "already_disabled"
	case u.ID == p.UserID:
		outcome = "skipped_self"
	default:
		if err := s.disableUser(ctx, tx, u.ID); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE access_review_items SET applied_at = $1 WHERE id = $2`, now, it.ID); err != nil {
		return fmt.Errorf("mark item %s of the access review applied: %w", it.ID, err)
	}
	return audit.Record(ctx, tx, audit.Entry{Action: "access_review.revoke", ResourceType: "user", ResourceID: it.UserID,
		ResourceName: it.UserEmail, PartnerID: store.Deref(it.PartnerID), OrgID: store.Deref(it.OrgID), Details: map[string]any{
			"reviewId": r.ID, "reviewName": r.Name, "itemId": it.ID, "roleId": it.RoleID, "roleName": it.RoleName,
			"note": it.Note, "outcome": outcome}})
}
