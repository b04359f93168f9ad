package identity

import (
	"context"
	"fmt"
	"strings"

	"gale/internal/platform/access"
	"gale/internal/platform/store"
)

// UsersSeeingOrg returns the IDs of the active users who may see organization orgID of
// partner partnerID and hold perm: system users, the partner's users reaching all its
// organizations or this one, and the organization's own users, each with a role granting
// perm (literally or through a wildcard). Other domains ask this (who is told of an alert)
// rather than read users and roles themselves.
func UsersSeeingOrg(ctx context.Context, q store.Querier, partnerID, orgID string, perm access.Perm) ([]string, error) {
	query := `SELECT u.id FROM users u JOIN roles r ON r.id = u.role_id
	WHERE u.status = '` + StatusActive + `'
	AND (u.scope = '` + string(access.LevelSystem) + `'
		OR (u.scope = '` + string(access.LevelPartner) + `' AND u.partner_id = $1 AND (u.org_access = '` + OrgAccessAll + `'
			OR (u.org_access = '` + OrgAccessSelected + `' AND EXISTS (SELECT 1 FROM user_org_access x WHERE x.user_id = u.id AND x.org_id = $2))))
		OR (u.scope = '` + string(access.LevelOrganization) + `' AND u.org_id = $2))
	AND (` + grantCond("r.permissions", perm) + `)`
	ids, err := store.QueryStrings(ctx, q, query, partnerID, orgID)
	if err != nil {
		return nil, fmt.Errorf("select users seeing organization %s with %s: %w", orgID, perm, err)
	}
	return ids, nil
}

// grantCond renders the condition that a JSON array column of grants holds perm, directly or
// through a wildcard. perm is a catalog constant, never request input, so it is spelt into
// the SQL text.
func grantCond(col string, perm access.Perm) string {
	res, act, _ := strings.Cut(string(perm), ":")
	var conds []string
	for _, g := range []string{res + ":" + act, res + ":*", "*:" + act, "*:*"} {
		conds = append(conds, "CAST("+col+" AS TEXT) LIKE '%\""+g+"\"%'")
	}
	return strings.Join(conds, " OR ")
}
