package inventory

import (
	"context"
	"errors"
	"unsafe"

	"golang.org/x/sys/windows"

	"gale/internal/wire/agentproto"
)

// loggedInUsers lists the users with a console or Remote Desktop session, connected or not.
// Naming a session's user takes the SYSTEM account the agent service runs as; Windows does
// not tell when a session started here, so StartedAt stays zero.
func loggedInUsers(context.Context) ([]agentproto.LoggedInUser, error) {
	var sessions *windows.WTS_SESSION_INFO
	var count uint32
	// Handle 0 is WTS_CURRENT_SERVER_HANDLE: this machine.
	if err := windows.WTSEnumerateSessions(0, 0, 1, &sessions, &count); err != nil {
		return nil, err
	}
	defer windows.WTSFreeMemory(uintptr(unsafe.Pointer(sessions)))

	users := []agentproto.LoggedInUser{}
	var errs []error
	for _, s := range unsafe.Slice(sessions, count) {
		// Session 0 runs services only; other sessions without a user sit at the sign-in screen.
		if s.SessionID == 0 || (s.State != windows.WTSActive && s.State != windows.WTSDisconnected) {
			continue
		}
		name, err := sessionUser(s.SessionID)
		if errors.Is(err, windows.ERROR_NO_TOKEN) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		users = append(users, agentproto.LoggedInUser{
			Username: name,
			Terminal: windows.UTF16PtrToString(s.WindowStationName),
		})
	}
	if len(users) == 0 {
		return users, errors.Join(errs...)
	}
	return users, nil
}

// sessionUser names the user of a session as DOMAIN\user.
func sessionUser(session uint32) (string, error) {
	var token windows.Token
	if err := windows.WTSQueryUserToken(session, &token); err != nil {
		return "", err
	}
	defer token.Close()
	user, err := token.GetTokenUser()
	if err != nil {
		return "", err
	}
	account, domain, _, err := user.User.Sid.LookupAccount("")
	if err != nil {
		return "", err
	}
	return domain + `\` + account, nil
}
