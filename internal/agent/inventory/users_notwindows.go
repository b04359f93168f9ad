//go:build !windows

package inventory

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"github.com/shirou/gopsutil/v4/host"

	"gale/internal/wire/agentproto"
)

// loggedInUsers lists sessions through gopsutil, which reads utmp (or asks systemd-logind
// where utmp is gone). A machine without a session record, like most containers, has no
// interactive sessions rather than a failure.
func loggedInUsers(ctx context.Context) ([]agentproto.LoggedInUser, error) {
	stats, err := host.UsersWithContext(ctx)
	if errors.Is(err, fs.ErrNotExist) {
		return []agentproto.LoggedInUser{}, nil
	}
	if err != nil {
		return nil, err
	}
	users := make([]agentproto.LoggedInUser, 0, len(stats))
	for _, s := range stats {
		u := agentproto.LoggedInUser{Username: s.User, Terminal: s.Terminal, Host: s.Host}
		if s.Started > 0 {
			u.StartedAt = time.Unix(int64(s.Started), 0).UTC()
		}
		users = append(users, u)
	}
	return users, nil
}
