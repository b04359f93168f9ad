package terminal

import "gale/internal/wire/agentproto"

// start refuses: this agent offers no terminal on Windows.
func start(uint16, uint16) (shellTerm, string, error) {
	return nil, "", &agentproto.CallError{Code: agentproto.ErrNotSupported, Message: "remote terminals are not available on Windows yet"}
}
