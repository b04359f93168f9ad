package devices

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"gale/internal/platform/apperr"
	"gale/internal/wire/agentproto"
)

// CommandKind is a kind of device command. The domain that owns a kind declares it on the
// module kernel (k.Declare); devices keeps what all commands share (storage, delivery, states,
// bulk sends) and asks the kind about the rest.
type CommandKind struct {
	// Name is the command's type on the API and on the wire, e.g. "run_script".
	Name string
	// Validate checks a payload for a device of the given OS (agentproto.OSLinux, ..., or ""
	// while it is not known yet) and returns the payload to store and send. Refusals are
	// *apperr.Error. Nil means the kind takes no payload (null or {} at most).
	Validate func(payload json.RawMessage, osType string) (any, error)
	// DefaultTimeout is the timeout, in seconds, of a command that names none; MaxTimeout the
	// longest a caller may ask for (0: the API's limit, 3600).
	DefaultTimeout, MaxTimeout int
	// Wait, when set, is how many seconds a command of the validated payload waits on the agent
	// before its work starts (a reboot's delay). It is added to the timeout, which then counts
	// from the start of the work, so a long wait cannot time the command out.
	Wait func(payload any) int
	// OS lists the systems the kind runs on; empty means every system. A device whose OS is
	// not known yet is given the command.
	OS []string
	// OnResult, when set, runs in the transaction that records the agent's result of such a
	// command (a domain storing what the result carries).
	OnResult func(ctx context.Context, tx *sql.Tx, deviceID string, r agentproto.CommandResult) error
	// CancelSent is how a command of the kind that the agent already has is cancelled (see
	// CancelPolicy); a queued one of any kind is cancelled at once.
	CancelSent CancelPolicy
	// PayloadDoc describes the payload in the API document.
	PayloadDoc string
}

// maxCommandTimeout is the API's limit on timeoutSeconds.
const maxCommandTimeout = 3600

// addCommandKind adds a kind of command. A kind added twice or without a name or timeout is a
// wiring mistake.
func (s *Service) addCommandKind(k CommandKind) error {
	if k.Name == "" || k.DefaultTimeout <= 0 || k.DefaultTimeout > maxCommandTimeout || k.MaxTimeout < 0 || k.MaxTimeout > maxCommandTimeout {
		return fmt.Errorf("command kind %q needs a name and timeouts from 1 to 3600 seconds", k.Name)
	}
	if _, ok := s.kinds[k.Name]; ok {
		return fmt.Errorf("command kind %s declared twice", k.Name)
	}
	if k.MaxTimeout == 0 {
		k.MaxTimeout = maxCommandTimeout
	}
	s.kinds[k.Name] = k
	s.anyOnResult = s.anyOnResult || k.OnResult != nil
	return nil
}

// CommandKindNames lists the registered kinds in name order.
func (s *Service) CommandKindNames() []string {
	names := make([]string, 0, len(s.kinds))
	for n := range s.kinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// DocumentCommandKinds writes the registered kinds into the API document's command schemas
// (the type's enum, the payload's description), once every module has registered its kinds.
func (s *Service) DocumentCommandKinds(oapi *huma.OpenAPI) {
	names := s.CommandKindNames()
	enum := make([]any, len(names))
	var docs []string
	for i, n := range names {
		enum[i] = n
		if d := s.kinds[n].PayloadDoc; d != "" {
			docs = append(docs, n+": "+d)
		}
	}
	for _, schema := range []string{"CommandInput", "BulkInput"} {
		sc := oapi.Components.Schemas.Map()[schema]
		if sc == nil || sc.Properties["type"] == nil {
			continue
		}
		sc.Properties["type"].Enum = enum
		if p := sc.Properties["payload"]; p != nil {
			p.Description = strings.Join(docs, " ")
		}
		sc.PrecomputeMessages()
	}
}

// validateCommand checks a command for a device of the given OS and returns its normalized
// payload and timeout.
func (s *Service) validateCommand(in CommandInput, osType string) (string, int, error) {
	k, ok := s.kinds[in.Type]
	if !ok {
		return "", 0, apperr.Invalid("type", "type must be one of "+strings.Join(s.CommandKindNames(), ", "))
	}
	if len(k.OS) > 0 && osType != "" && !slices.Contains(k.OS, osType) {
		return "", 0, apperr.BadRequest(agentproto.ErrNotSupported, in.Type+" runs on "+strings.Join(k.OS, ", ")+", not on "+osType)
	}
	timeout := k.DefaultTimeout
	if in.TimeoutSeconds > 0 {
		if in.TimeoutSeconds > k.MaxTimeout {
			return "", 0, apperr.Invalid("timeoutSeconds", in.Type+" may take at most "+strconv.Itoa(k.MaxTimeout)+" seconds")
		}
		timeout = in.TimeoutSeconds
	}
	var payload any = struct{}{}
	if k.Validate != nil {
		p, err := k.Validate(in.Payload, osType)
		if err != nil {
			return "", 0, err
		}
		payload = p
		if k.Wait != nil {
			timeout += k.Wait(p)
		}
	} else if len(in.Payload) > 0 && string(in.Payload) != "null" && string(in.Payload) != "{}" {
		return "", 0, apperr.Invalid("payload", in.Type+" takes no payload")
	}
	b, err := json.Marshal(payload)
	return string(b), timeout, err
}
