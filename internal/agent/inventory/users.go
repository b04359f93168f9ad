package inventory

import (
	"context"
	"errors"
	"sync"

	"gale/internal/wire/agentproto"
)

// maxLastLogons is how many past logons the inventory lists.
const maxLastLogons = 10

func collectUsers(ctx context.Context, inv *agentproto.Inventory) error {
	users, err := loggedInUsers(ctx)
	if users != nil {
		inv.Users = users
	}
	logons, logonsErr := recentLogons(maxLastLogons)
	if logons != nil {
		inv.LastLogons = logons
	}
	return errors.Join(err, logonsErr)
}

// lastKnownUser is the last user LastUser found, kept for when it finds none.
var lastKnownUser struct {
	sync.Mutex
	name string
}

// LastUser returns the user of the most recently started interactive session; when nobody is
// logged in, the user of the last recorded logon; when the platform keeps no such record,
// the last user it found before. It is "" only until a first user is known: a device's last
// user stays known after they log out.
func LastUser(ctx context.Context) string {
	users, _ := loggedInUsers(ctx)
	var last agentproto.LoggedInUser
	for _, u := range users {
		if last.Username == "" || u.StartedAt.After(last.StartedAt) {
			last = u
		}
	}
	if last.Username == "" {
		if logons, _ := recentLogons(1); len(logons) > 0 {
			last = logons[0]
		}
	}
	lastKnownUser.Lock()
	defer lastKnownUser.Unlock()
	if last.Username != "" {
		lastKnownUser.name = last.Username
	}
	return lastKnownUser.name
}
