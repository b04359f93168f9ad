package tenancy

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

var slugPattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

const maxSlugLen = 63

func validSlug(slug string) error {
	if len(slug) > maxSlugLen || !slugPattern.MatchString(slug) {
		return apperr.Invalid("slug", "use 1 to 63 lower-case letters, digits and single dashes, e.g. acme-corp")
	}
	return nil
}

// Slugify derives a slug from a name: accents dropped, lower case, runs of anything else
// turned into one dash.
func Slugify(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range norm.NFKD.String(name) {
		switch {
		case unicode.Is(unicode.Mn, r):
			continue
		case r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(unicode.ToLower(r))
		default:
			dash = true
		}
	}
	s := b.String()
	if len(s) > maxSlugLen-4 {
		s = strings.TrimRight(s[:maxSlugLen-4], "-")
	}
	if s == "" {
		s = "org"
	}
	return s
}

// ErrSlugConflict is the conflict of an explicitly given slug that is taken. The partner API
// maps it to its own code.
var ErrSlugConflict = &apperr.Error{Kind: apperr.KindConflict, Code: "SLUG_CONFLICT", Message: "slug is already in use",
	Details: []apperr.Detail{{Field: "slug", Message: "already in use"}}}

// chooseSlug returns the explicit slug after validation, or a free slug derived from name:
// "acme", then "acme-2", "acme-3", ... Slugs of deleted rows stay reserved (they can be
// restored). A race between two derivations is settled by the unique index.
func chooseSlug(ctx context.Context, tx *sql.Tx, table, name string, explicit *string) (string, error) {
	if explicit != nil {
		return *explicit, validSlug(*explicit)
	}
	base := Slugify(name)
	// "base" and every "base-..." sort between "base" and "base." ('.' follows '-'), so a
	// range on the unique slug index finds them without scanning the table.
	slugs, err := store.QueryStrings(ctx, tx, `SELECT slug FROM `+table+` WHERE slug >= $1 AND slug < $2`, base, base+".")
	if err != nil {
		return "", fmt.Errorf("list slugs like %s: %w", base, err)
	}
	taken := map[string]bool{}
	for _, s := range slugs {
		taken[s] = true
	}
	candidate := base
	for i := 2; taken[candidate]; i++ {
		candidate = fmt.Sprintf("%s-%d", base, i)
	}
	return candidate, nil
}

// slugConflict turns a unique violation on the slug into ErrSlugConflict.
func slugConflict(err error) error {
	if store.IsUniqueViolation(err) && strings.Contains(err.Error(), "slug") {
		return ErrSlugConflict
	}
	return err
}
