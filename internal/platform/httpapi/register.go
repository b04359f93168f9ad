package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
)

// Route describes one API operation.
type Route struct {
	// ID is the operationId.
	ID          string
	Method      string
	Path        string // below Prefix, e.g. "/orgs/sites/{id}"
	Tag         string
	Summary     string
	Description string
	// Permission the caller must hold; empty means any signed-in caller. For a
	// ServicePrincipal route it is the scope the principal must hold.
	Permission access.Perm
	// MFA gates the operation: with ENABLE_2FA on, a JWT session must have completed MFA
	// (403 "MFA required" otherwise). Operations that change tenancy or who may do what are
	// gated; API keys and service principals are not, as they are created through gated
	// operations.
	MFA bool
	// ChangesAccess marks a write that may change who may do what or an organization (users,
	// roles, API keys, organizations, ...): once it succeeds, every node forgets the principals
	// and organization pages it cached (Options.AfterWrite).
	ChangesAccess bool
	// Public operations need no credential (login, health, invite acceptance).
	Public bool
	// ServicePrincipal marks an operation of the partner API: only a service-principal key
	// authenticates it (the authenticator given to SetServicePrincipals), and Permission is
	// the scope the principal must hold. Such keys authenticate nothing else.
	ServicePrincipal bool
	// Agent marks an operation of agents (enrollment, heartbeats, results): its own handler
	// authenticates the agent, and what it writes never changes who may do what.
	Agent bool
	// Status is the success status; 200 when zero.
	Status int
	// MaxBodyBytes overrides the server's body limit for this operation.
	MaxBodyBytes int64
	// RawBodyBytes, when positive, lets the operation take a raw application/octet-stream
	// body of up to that many bytes besides its JSON one: it streams to the handler, which
	// reads it with RawBodyFrom (file uploads, attachments, bundles). Such a body has no read
	// deadline: it takes as long as its bytes do.
	RawBodyBytes int64
	// Errors are further error statuses to document (e.g. 409), with the envelope as body.
	// Register adds 404 for a path with a parameter.
	Errors []int
	// Hidden serves the operation but leaves it out of the OpenAPI document: an alias of a
	// documented operation at a path the document cannot name.
	Hidden bool
}

// Register adds an operation whose handler runs only after the caller is authenticated,
// holds r.Permission, and (with ENABLE_2FA) completed MFA when the operation is MFA-gated.
// Errors the handler returns that are not *apperr.Error are logged and answered as 500.
func Register[I, O any](s *Server, r Route, handler func(context.Context, *I) (*O, error)) {
	if r.Permission != "" && !access.Known(r.Permission) {
		panic("httpapi: operation " + r.ID + " requires permission " + string(r.Permission) + ", which the catalog lacks")
	}
	if r.MFA && (r.Public || r.ServicePrincipal || r.Agent) {
		panic("httpapi: operation " + r.ID + " is MFA-gated but not called by users")
	}
	s.routes[r.ID] = r
	op := huma.Operation{
		OperationID:   r.ID,
		Method:        r.Method,
		Path:          r.Path,
		Tags:          []string{r.Tag},
		Summary:       r.Summary,
		Description:   r.Description,
		DefaultStatus: r.Status,
		MaxBodyBytes:  s.opts.MaxBodyBytes,
		Middlewares:   huma.Middlewares{s.authorize(r), s.inputPolicy(r, takesBody[I]())},
		Errors:        declaredErrors(r),
		Hidden:        r.Hidden,
	}
	if r.MaxBodyBytes > 0 {
		op.MaxBodyBytes = r.MaxBodyBytes
	}
	if r.RawBodyBytes > 0 {
		op.Middlewares = huma.Middlewares{s.authorize(r), s.rawBody(r.RawBodyBytes), s.inputPolicy(r, takesBody[I]())}
		op.BodyReadTimeout = -1
		op.Metadata = map[string]any{metaRawBody: true}
	}
	switch {
	case r.ServicePrincipal:
		op.Security = []map[string][]string{{"servicePrincipalKey": {}}}
		op.Errors = append(op.Errors, http.StatusUnauthorized, http.StatusForbidden)
		op.Description = joinDoc(op.Description, "Requires service-principal scope `"+string(r.Permission)+"`.")
	case !r.Public:
		op.Security = []map[string][]string{{"bearer": {}}, {"apiKey": {}}}
		op.Errors = append(op.Errors, http.StatusUnauthorized, http.StatusForbidden)
		if r.Permission != "" {
			op.Description = joinDoc(op.Description, "Requires permission `"+string(r.Permission)+"`.")
		}
		if r.MFA {
			op.Description = joinDoc(op.Description, "MFA-gated: with ENABLE_2FA on, a JWT session must have completed MFA.")
		}
	default:
		// Public: an empty list says that no credential is needed, where none would say nothing.
		op.Security = []map[string][]string{}
	}
	var afterWrite func(context.Context)
	if r.ChangesAccess {
		afterWrite = s.opts.AfterWrite
	}
	checkText := bodyTextCheck[I](r)
	huma.Register(s.API, op, func(ctx context.Context, in *I) (*O, error) {
		if checkText != nil {
			if ae := checkText(in); ae != nil {
				return nil, apiError{ae}
			}
		}
		out, err := handler(ctx, in)
		if err == nil {
			if afterWrite != nil {
				afterWrite(ctx)
			}
			return out, nil
		}
		var ae *apperr.Error
		if errors.As(err, &ae) {
			return nil, apiError{ae}
		}
		s.logger.ErrorContext(ctx, "request failed", "operation", r.ID, "error", err,
			"requestId", access.RequestFrom(ctx).ID)
		return nil, apiError{internalError()}
	})
}

// declaredErrors is r.Errors, with 404 when the path has a parameter: a parameter that names
// nothing the caller can see (missing, or out of scope) is answered 404 on every route.
func declaredErrors(r Route) []int {
	errs := slices.Clone(r.Errors)
	if strings.Contains(r.Path, "{") && !slices.Contains(errs, http.StatusNotFound) {
		errs = append(errs, http.StatusNotFound)
	}
	return errs
}

func joinDoc(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n\n" + b
}

// authorize is the per-operation gate; it runs before the body is read.
func (s *Server) authorize(r Route) func(huma.Context, func(huma.Context)) {
	return func(hctx huma.Context, next func(huma.Context)) {
		if r.Public {
			next(hctx)
			return
		}
		req, _ := humago.Unwrap(hctx)
		ctx := hctx.Context()
		authn, missing := s.auth, "missing permission "
		if r.ServicePrincipal {
			authn, missing = s.servicePrincipals, "the service principal lacks the scope "
		}
		if authn == nil {
			s.writeHumaError(hctx, apperr.Unauthorized("this server does not serve the partner API"))
			return
		}
		p, err := authn.Authenticate(ctx, req)
		if err != nil {
			s.writeHumaError(hctx, err)
			return
		}
		ctx = access.WithPrincipal(ctx, p)
		if err := s.gate(ctx, r, p, missing); err != nil {
			s.writeHumaError(hctx, err)
			return
		}
		next(huma.WithContext(hctx, ctx))
	}
}

// gate refuses a principal the route's permission, or its MFA when the route is gated, and
// records the refusal.
func (s *Server) gate(ctx context.Context, r Route, p *access.Principal, missing string) error {
	refused, reason := s.refusal(r, p, missing)
	if refused == nil {
		return nil
	}
	s.security.RecordDenied(ctx, r.ID, reason)
	return refused
}

// refusal is why the route refuses the principal (the error and the reason to record), or
// nil: a missing permission, or a session without MFA on an MFA-gated route.
func (s *Server) refusal(r Route, p *access.Principal, missing string) (*apperr.Error, string) {
	if r.Permission != "" && !p.Can(r.Permission) {
		return apperr.Forbidden(missing + string(r.Permission)), missing + string(r.Permission)
	}
	if r.MFA && s.opts.Enable2FA && p.Kind == access.ActorUser && !p.MFA {
		return apperr.MFARequired(), "MFA required"
	}
	return nil, ""
}

// Allow answers whether the principal in ctx may call the operation id, by the same rules
// as the API's own gate (permission, MFA), refusals recorded alike: for callers that reach
// the operation's service another way, as the console's pages do. An unknown id is a wiring
// mistake and refused.
func (s *Server) Allow(ctx context.Context, id string) error {
	r, ok := s.routes[id]
	if !ok {
		return fmt.Errorf("no API operation %q to take the rules of", id)
	}
	p := access.PrincipalFrom(ctx)
	if p == nil {
		return apperr.Unauthorized("sign in first")
	}
	return s.gate(ctx, r, p, "missing permission ")
}

// Succeeded runs what follows a success of the operation id, as the API does after its
// handler: for an operation marked ChangesAccess, every node forgets the principals and
// organization pages it cached. Callers that reach the operation's service another way (the
// console) call it after the service succeeded.
func (s *Server) Succeeded(ctx context.Context, id string) {
	if r, ok := s.routes[id]; ok && r.ChangesAccess && s.opts.AfterWrite != nil {
		s.opts.AfterWrite(ctx)
	}
}

// Permits is Allow without recording a refusal: whether to offer the operation at all (a
// page leaves out the buttons and menus of what its user may not do).
func (s *Server) Permits(ctx context.Context, id string) bool {
	r, ok := s.routes[id]
	p := access.PrincipalFrom(ctx)
	if !ok || p == nil {
		return false
	}
	refused, _ := s.refusal(r, p, "")
	return refused == nil
}

func (s *Server) writeHumaError(hctx huma.Context, err error) {
	ae, ok := apperr.As(err)
	if !ok {
		s.logger.ErrorContext(hctx.Context(), "authentication failed", "error", err)
		ae = internalError()
	}
	e := apiError{ae}
	for k, v := range e.GetHeaders() {
		for _, vv := range v {
			hctx.AppendHeader(k, vv)
		}
	}
	hctx.SetHeader("Content-Type", "application/json")
	hctx.SetStatus(StatusOf(ae))
	_ = json.NewEncoder(hctx.BodyWriter()).Encode(toEnvelope(ae))
}

// documentErrors documents 400 (not huma's 422) and the envelope for every error response.
// An operation that takes parameters or a body answers 400 when they fail validation, which
// huma documents only beside declared errors: public operations declare none.
func documentErrors(_ *huma.OpenAPI, op *huma.Operation) {
	if op.Responses == nil {
		return
	}
	const invalid = "Validation failed (VALIDATION_ERROR, with details per field)"
	if resp, ok := op.Responses["422"]; ok {
		delete(op.Responses, "422")
		resp.Description = invalid
		op.Responses["400"] = resp
	}
	if _, ok := op.Responses["400"]; !ok && (len(op.Parameters) > 0 || op.RequestBody != nil) {
		op.Responses["400"] = &huma.Response{Description: invalid,
			Content: map[string]*huma.MediaType{"application/json": {Schema: errorSchema}}}
	}
	for code, resp := range op.Responses {
		if n, _ := strconv.Atoi(code); (n >= 400 || code == "default") && resp.Content != nil {
			resp.Content = map[string]*huma.MediaType{"application/json": {Schema: errorSchema}}
		}
	}
}

var errorSchema = &huma.Schema{
	Type:     "object",
	Required: []string{"error"},
	Properties: map[string]*huma.Schema{
		"error": {
			Type:     "object",
			Required: []string{"code", "message"},
			Properties: map[string]*huma.Schema{
				"code":    {Type: "string"},
				"message": {Type: "string"},
				"details": {Type: "array", Items: &huma.Schema{Type: "object", Properties: map[string]*huma.Schema{
					"field":   {Type: "string"},
					"message": {Type: "string"},
				}}},
			},
		},
	},
}
