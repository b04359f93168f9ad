package tenancy_test

import (
	"context"
	"testing"

	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/platform/store/storetest"
)

// placeWorld is two partners: Alpha with organizations a1, a2 and a deleted one, Beta with b1.
type placeWorld struct {
	db                          *store.DB
	alpha, beta, gone           string
	a1, a2, aDeleted, b1, bGone string
}

func newPlaceWorld(t *testing.T) placeWorld {
	t.Helper()
	w := placeWorld{db: storetest.Open(t), alpha: store.NewID(), beta: store.NewID(), gone: store.NewID(),
		a1: store.NewID(), a2: store.NewID(), aDeleted: store.NewID(), b1: store.NewID(), bGone: store.NewID()}
	now := store.Now()
	for _, p := range []struct {
		id, slug string
		deleted  any
	}{{w.alpha, "alpha", nil}, {w.beta, "beta", nil}, {w.gone, "gone", now}} {
		storetest.Exec(t, w.db.SQL, `INSERT INTO partners (id, name, slug, created_at, updated_at, deleted_at) VALUES ($1, $2, $2, $3, $3, $4)`,
			p.id, p.slug, now, p.deleted)
	}
	for _, o := range []struct {
		id, partner, slug string
		deleted           any
	}{{w.a1, w.alpha, "a1", nil}, {w.a2, w.alpha, "a2", nil}, {w.aDeleted, w.alpha, "a-deleted", now}, {w.b1, w.beta, "b1", nil},
		{w.bGone, w.gone, "b-gone", nil}} {
		storetest.Exec(t, w.db.SQL, `INSERT INTO organizations (id, partner_id, name, slug, created_at, updated_at, deleted_at)
			VALUES ($1, $2, $3, $3, $4, $4, $5)`, o.id, o.partner, o.slug, now, o.deleted)
	}
	return w
}

// errMatches reports whether err is the *apperr.Error of want's kind, code, message and details.
func errMatches(err error, want *apperr.Error) bool {
	got, ok := apperr.As(err)
	if !ok || want == nil {
		return ok == (want != nil)
	}
	return got.Kind == want.Kind && got.Code == want.Code && got.Message == want.Message && len(got.Details) == len(want.Details) &&
		(len(want.Details) == 0 || got.Details[0] == want.Details[0])
}

func TestPlace(t *testing.T) {
	w := newPlaceWorld(t)
	system := access.SystemScope()
	alpha := access.Scope{Level: access.LevelPartner, PartnerID: w.alpha}
	alphaLimited := access.Scope{Level: access.LevelPartner, PartnerID: w.alpha, OrgIDs: []string{w.a1}}
	orgA1 := access.Scope{Level: access.LevelOrganization, PartnerID: w.alpha, OrgID: w.a1}

	noSuchOrg := apperr.Invalid("orgId", "no such organization")
	orgRequired := apperr.Invalid("orgId", "orgId is required")
	refused := apperr.Forbidden("partner-wide things are managed by the partner")
	// Like webhooks and notification channels: partner-wide rows, partnerId or orgId.
	loose := tenancy.PlaceOptions{Noun: "thing", PartnerWide: true, PartnerWideRefused: refused}
	// Like custom fields and alert rules: partnerId is the system caller's alone.
	strict := loose
	strict.OnlySystemNamesPartner = true
	// Like groups: every row belongs to an organization.
	orgOnly := tenancy.PlaceOptions{Noun: "thing"}
	with := func(o tenancy.PlaceOptions, partnerID string) tenancy.PlaceOptions {
		o.PartnerID = partnerID
		return o
	}

	tests := []struct {
		name    string
		scope   access.Scope
		orgID   string
		opts    tenancy.PlaceOptions
		want    tenancy.Placement
		wantErr *apperr.Error
	}{
		{"system names an organization", system, w.b1, orgOnly, tenancy.Placement{PartnerID: w.beta, OrgID: w.b1}, nil},
		{"system without orgId, organization rows only", system, "", orgOnly, tenancy.Placement{}, orgRequired},
		{"system names an organization, partner implied", system, w.a2, loose, tenancy.Placement{PartnerID: w.alpha, OrgID: w.a2}, nil},
		{"system names a partner only", system, "", with(loose, w.beta), tenancy.Placement{PartnerID: w.beta}, nil},
		{"system names neither", system, "", loose, tenancy.Placement{},
			apperr.Invalid("partnerId", "system callers name the partner (or orgId) of a new thing")},
		{"system names a deleted partner", system, "", with(loose, w.gone), tenancy.Placement{},
			apperr.Invalid("partnerId", "no such partner")},
		{"system names an organization of another partner", system, w.b1, with(loose, w.alpha), tenancy.Placement{}, noSuchOrg},
		{"system names a soft-deleted organization", system, w.aDeleted, orgOnly, tenancy.Placement{}, noSuchOrg},
		{"system names an organization, partner implied (strict)", system, w.a1, strict, tenancy.Placement{PartnerID: w.alpha, OrgID: w.a1}, nil},
		{"system names neither (strict)", system, "", strict, tenancy.Placement{},
			apperr.Invalid("partnerId", "system callers name the partner (or orgId) of a new thing")},
		{"system names partner and organization (strict)", system, w.a1, with(strict, w.alpha), tenancy.Placement{PartnerID: w.alpha, OrgID: w.a1}, nil},
		{"system names a deleted partner (strict)", system, w.bGone, with(strict, w.gone), tenancy.Placement{},
			apperr.Invalid("partnerId", "no such partner")},
		{"system, partner and organization disagree (strict)", system, w.b1, with(strict, w.alpha), tenancy.Placement{}, noSuchOrg},

		{"partner names its own organization", alpha, w.a1, orgOnly, tenancy.Placement{PartnerID: w.alpha, OrgID: w.a1}, nil},
		{"partner names a foreign organization", alpha, w.b1, orgOnly, tenancy.Placement{}, noSuchOrg},
		{"partner names a missing organization", alpha, store.NewID(), orgOnly, tenancy.Placement{}, noSuchOrg},
		{"partner names its soft-deleted organization", alpha, w.aDeleted, orgOnly, tenancy.Placement{}, noSuchOrg},
		{"partner names a foreign organization (loose)", alpha, w.b1, loose, tenancy.Placement{}, noSuchOrg},
		{"partner without orgId, organization rows only", alpha, "", orgOnly, tenancy.Placement{}, orgRequired},
		{"partner creates a partner-wide row", alpha, "", loose, tenancy.Placement{PartnerID: w.alpha}, nil},
		{"partner repeats its own partner", alpha, "", with(loose, w.alpha), tenancy.Placement{PartnerID: w.alpha}, nil},
		{"partner names another partner", alpha, "", with(loose, w.beta), tenancy.Placement{},
			apperr.Invalid("partnerId", "a new thing belongs to the caller's partner")},
		{"partner names a partner (strict)", alpha, w.a1, with(strict, w.alpha), tenancy.Placement{},
			apperr.Invalid("partnerId", "only system callers name the partner; a new thing belongs to the caller's partner")},
		{"partner with an organization and another partner (loose)", alpha, w.a1, with(loose, w.beta), tenancy.Placement{}, noSuchOrg},
		{"limited partner, partner-wide row", alphaLimited, "", loose, tenancy.Placement{}, refused},
		{"limited partner, partner-wide row, generic refusal", alphaLimited, "", tenancy.PlaceOptions{Noun: "thing", PartnerWide: true}, tenancy.Placement{},
			apperr.Forbidden("a partner-wide thing concerns every organization of the partner; callers limited to some organizations name one (orgId)")},
		{"limited partner, organization it reaches", alphaLimited, w.a1, strict, tenancy.Placement{PartnerID: w.alpha, OrgID: w.a1}, nil},
		{"limited partner, organization it does not reach", alphaLimited, w.a2, loose, tenancy.Placement{}, noSuchOrg},

		{"organization caller defaults to its own", orgA1, "", orgOnly, tenancy.Placement{PartnerID: w.alpha, OrgID: w.a1}, nil},
		{"organization caller, partner-wide allowed, still its own", orgA1, "", strict, tenancy.Placement{PartnerID: w.alpha, OrgID: w.a1}, nil},
		{"organization caller names another organization", orgA1, w.a2, loose, tenancy.Placement{}, noSuchOrg},
		{"organization caller names a foreign organization", orgA1, w.b1, orgOnly, tenancy.Placement{}, noSuchOrg},
		{"zero scope sees nothing", access.Scope{}, w.a1, orgOnly, tenancy.Placement{}, noSuchOrg},
		{"zero scope, partner-wide row", access.Scope{}, "", loose, tenancy.Placement{}, refused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tenancy.Place(context.Background(), w.db, tt.scope, tt.orgID, tt.opts)
			if !errMatches(err, tt.wantErr) {
				t.Fatalf("Place() error = %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("Place() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// A foreign organization must be answered exactly as a missing one, so nothing leaks.
func TestPlaceForeignOrgIsAMissingOrg(t *testing.T) {
	w := newPlaceWorld(t)
	alpha := access.Scope{Level: access.LevelPartner, PartnerID: w.alpha}
	_, foreign := tenancy.Place(context.Background(), w.db, alpha, w.b1, tenancy.PlaceOptions{})
	_, missing := tenancy.Place(context.Background(), w.db, alpha, store.NewID(), tenancy.PlaceOptions{})
	m, _ := apperr.As(missing)
	if m == nil || !errMatches(foreign, m) {
		t.Errorf("foreign organization = %v, missing organization = %v; want the same answer", foreign, missing)
	}
}

func TestServiceReadsOnItsDatabase(t *testing.T) {
	w := newPlaceWorld(t)
	s := tenancy.New(tenancy.Deps{DB: w.db}, tenancy.Options{})
	ctx := context.Background()
	alpha := access.Scope{Level: access.LevelPartner, PartnerID: w.alpha}
	at, err := s.Place(ctx, alpha, w.a1, tenancy.PlaceOptions{Noun: "thing"})
	if err != nil || at != (tenancy.Placement{PartnerID: w.alpha, OrgID: w.a1}) {
		t.Fatalf("Place = %+v, %v", at, err)
	}
	if partner, ok, err := s.OrgInScope(ctx, alpha, w.b1); err != nil || ok || partner != "" {
		t.Fatalf("OrgInScope of another partner's organization = %q, %v, %v", partner, ok, err)
	}
	if org, site, err := s.Names(ctx, w.a1, store.NewID()); err != nil || org != "a1" || site != "" {
		t.Fatalf("Names = %q, %q, %v", org, site, err)
	}
	owners, err := s.OrgOwners(ctx, []string{w.a1, w.aDeleted})
	if err != nil || len(owners) != 1 || owners[w.a1] != (tenancy.Owner{PartnerID: w.alpha, OrgID: w.a1}) {
		t.Fatalf("OrgOwners = %v, %v", owners, err)
	}
}
