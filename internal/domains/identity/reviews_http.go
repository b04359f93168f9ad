package identity

import (
	"gale/internal/platform/access"

	"context"
	"net/http"

	"gale/internal/platform/httpapi"
)

type reviewOutput struct{ Body AccessReview }

type listReviewsInput struct {
	httpapi.PageQuery
	Status string `query:"status" enum:"in_progress,completed"`
}

type createReviewInput struct{ Body NewAccessReview }

type decideInput struct {
	ID     string `path:"id" format:"uuid"`
	ItemID string `path:"itemId" format:"uuid"`
	Body   Decision
}

type itemOutput struct{ Body AccessReviewItem }

func (s *Service) registerReviews(api *httpapi.Server) {
	const tag = "Access reviews"

	httpapi.Register(api, httpapi.Route{ID: "list-access-reviews", Method: http.MethodGet, Path: "/access-reviews", Tag: tag,
		Permission: access.AccessReviewsRead, Summary: "List access reviews", Description: "Reviews in the caller's scope, newest first, without items."},
		func(ctx context.Context, in *listReviewsInput) (*httpapi.ListBody[AccessReview], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListAccessReviews(ctx, in.Status, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-access-review", MFA: true, ChangesAccess: true, Method: http.MethodPost, Path: "/access-reviews", Tag: tag,
		Permission: access.AccessReviewsWrite, Status: http.StatusCreated, Summary: "Start an access review",
		Description: "Snapshots every user in the caller's scope that is not disabled (email, name, role, partner, organization, orgAccess) as a pending item. Status in_progress."},
		func(ctx context.Context, in *createReviewInput) (*reviewOutput, error) {
			r, err := s.CreateAccessReview(ctx, in.Body)
			return &reviewOutput{r}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-access-review", Method: http.MethodGet, Path: "/access-reviews/{id}", Tag: tag,
		Permission: access.AccessReviewsRead, Summary: "Get an access review with its items"},
		func(ctx context.Context, in *idPath) (*reviewOutput, error) {
			r, err := s.GetAccessReview(ctx, in.ID)
			return &reviewOutput{r}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "decide-access-review-item", MFA: true, ChangesAccess: true, Method: http.MethodPatch, Path: "/access-reviews/{id}/items/{itemId}", Tag: tag,
		Permission: access.AccessReviewsWrite, Summary: "Keep or revoke one user's access",
		Description: "Only while the review is in_progress (409 after). A revoke takes effect when the review completes. Revoking your own access is 403."},
		func(ctx context.Context, in *decideInput) (*itemOutput, error) {
			it, err := s.DecideItem(ctx, in.ID, in.ItemID, in.Body)
			return &itemOutput{it}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "complete-access-review", MFA: true, ChangesAccess: true, Method: http.MethodPost, Path: "/access-reviews/{id}/complete", Tag: tag,
		Permission: access.AccessReviewsWrite, Summary: "Complete an access review",
		Description: "409 while any item is pending, and for a review already completed. Every revoke is carried out: the user is disabled and its sessions end; each revocation is audited."},
		func(ctx context.Context, in *idPath) (*reviewOutput, error) {
			r, err := s.CompleteAccessReview(ctx, in.ID)
			return &reviewOutput{r}, err
		})
}
