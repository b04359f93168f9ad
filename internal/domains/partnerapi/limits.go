package partnerapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"gale/internal/platform/apperr"
	"gale/internal/platform/partnerexport"
	"gale/internal/platform/ratelimit"
	"gale/internal/platform/store"
)

// Budgets of §8, per hour. Counters live in rate_limits, so they hold across nodes and
// restarts.
const (
	writesPerPrincipal = 120
	mintsPerPrincipal  = 10
	mintsPerPartner    = 100
	budgetWindow       = time.Hour
)

// budget is one counter a request draws from.
type budget struct {
	key  string
	rule ratelimit.Rule
	// what names the budget in a refusal.
	what string
}

// writeBudgets are the budgets of organization and site creation: the principal's (120 per
// hour, or its own limit when lower) and the key's own limit, when it has one.
func writeBudgets(c *credential) []budget {
	limit, what := writesPerPrincipal, "the partner API's 120 writes per hour per service principal"
	if c.RateLimit != nil && *c.RateLimit < limit {
		limit, what = *c.RateLimit, fmt.Sprintf("the service principal's own limit of %d writes per hour", *c.RateLimit)
	}
	out := []budget{{key: "partner-api:writes:principal:" + c.ID, rule: ratelimit.Rule{Limit: limit, Window: budgetWindow}, what: what}}
	if c.KeyRate != nil {
		out = append(out, budget{key: "partner-api:writes:key:" + c.KeyID, rule: ratelimit.Rule{Limit: *c.KeyRate, Window: budgetWindow},
			what: fmt.Sprintf("the key's own limit of %d writes per hour", *c.KeyRate)})
	}
	return out
}

// mintBudgets are the budgets of enrollment-key creation, separate from the write budget.
func mintBudgets(c *credential) []budget {
	return []budget{
		{key: "partner-api:mints:principal:" + c.ID, rule: ratelimit.Rule{Limit: mintsPerPrincipal, Window: budgetWindow},
			what: "10 enrollment keys per hour per service principal"},
		{key: "partner-api:mints:partner:" + c.PartnerID, rule: ratelimit.Rule{Limit: mintsPerPartner, Window: budgetWindow},
			what: "100 enrollment keys per hour per partner"},
	}
}

// RateLimitHeaders are the X-RateLimit-* headers of partner-API answers: the tightest
// budget the request draws from (for reads, which are not limited, the write budget).
type RateLimitHeaders = partnerexport.RateLimitHeaders

func tighten(h *RateLimitHeaders, r ratelimit.Rule, res ratelimit.Result) {
	if h.Limit != "" {
		if rem, _ := strconv.Atoi(h.Remaining); rem < res.Remaining {
			return
		}
	}
	h.Limit, h.Remaining = strconv.Itoa(r.Limit), strconv.Itoa(res.Remaining)
	h.Reset = strconv.FormatInt(res.Reset.Unix(), 10)
}

func rateHeader(h RateLimitHeaders) http.Header {
	out := http.Header{}
	out.Set("X-RateLimit-Limit", h.Limit)
	out.Set("X-RateLimit-Remaining", h.Remaining)
	out.Set("X-RateLimit-Reset", h.Reset)
	return out
}

// spend counts one request against every budget inside the request's transaction, so a
// request that fails spends nothing. A spent budget is 429 with Retry-After and the headers.
func (s *Service) spend(ctx context.Context, q store.Querier, budgets []budget) (RateLimitHeaders, error) {
	var h RateLimitHeaders
	for _, b := range budgets {
		res, err := s.limiter.HitIn(ctx, q, b.key, b.rule)
		if e, ok := apperr.As(err); ok && e.Code == apperr.CodeRateLimited {
			var spent RateLimitHeaders
			tighten(&spent, b.rule, ratelimit.Result{Reset: res.Reset})
			e.Message = "rate limit reached: " + b.what + "; retry after the Retry-After seconds"
			e.Header = rateHeader(spent)
			return spent, e
		}
		if err != nil {
			return h, err
		}
		tighten(&h, b.rule, res)
	}
	return h, nil
}

// peek reports the tightest budget without counting.
func (s *Service) peek(ctx context.Context, budgets []budget) (RateLimitHeaders, error) {
	var h RateLimitHeaders
	for _, b := range budgets {
		res, err := s.limiter.Peek(ctx, b.key, b.rule)
		if err != nil {
			return h, err
		}
		tighten(&h, b.rule, res)
	}
	return h, nil
}
