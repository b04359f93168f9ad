package inventory

import (
	"context"

	"gale/internal/agentproto"
)

func collectUsers(ctx context.Context, inv *agentproto.Inventory) error {
	users, err := loggedInUsers(ctx)
	if users != nil {
		inv.Users = users
	}
	return err
}

// LastUser returns the user of the most recently started interactive session, or "" when
// nobody is logged in or the platform does not tell.
func LastUser(ctx context.Context) string {
	users, _ := loggedInUsers(ctx)
	var last agentproto.LoggedInUser
	for _, u := range users {
		if last.Username == "" || u.StartedAt.After(last.StartedAt) {
			last = u
		}
	}
	return last.Username
}
