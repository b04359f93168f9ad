package agentproto

import "time"

// Privileged access management: a user of a Linux device asks the root agent to run a
// command as root (gale-agent elevate -- CMD) over a local Unix socket; the agent reports the
// request to the server with TypeElevationRequest, and the server's rules or a technician
// answer with CommandElevationDecision commands.

// TypeElevationRequest is the agent's report of a local elevation request (payload
// ElevationRequest). The server answers with a CommandElevationDecision naming LocalID.
const TypeElevationRequest = "elevation_request"

// CommandElevationDecision carries the server's decision on an elevation request (payload
// ElevationDecision): pending, approved, denied, ignored, then revoked or expired for an
// approved one.
const CommandElevationDecision = "elevation_decision"

// Bounds of an elevation request, checked by the agent and again by the server.
const (
	MaxElevationArgs        = 256
	MaxElevationCommandLine = 16 << 10
	MaxElevationPath        = 4096
	MaxElevationGroups      = 64
)

// ElevationRequest describes what a local user asked to run as root. Every field but
// LocalID and Grant was established by the agent, never taken from the asking process:
// the user from the socket's peer credentials, the path resolved with a fixed PATH, the
// hash of the file, the parent process image from /proc.
type ElevationRequest struct {
	// LocalID is the agent's correlation ID of the waiting client (a UUID).
	LocalID string `json:"localId"`
	// User is the requesting user's name; UID its numeric ID; Groups its group names.
	User   string   `json:"user"`
	UID    int      `json:"uid"`
	Groups []string `json:"groups,omitempty"`
	// Path is the absolute path of the executable; SHA256 the file's hash (lower-case hex).
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	// Signer and SignerThumbprint name the file's code signer; empty on Linux.
	Signer           string `json:"signer,omitempty"`
	SignerThumbprint string `json:"signerThumbprint,omitempty"`
	// ParentImage is the executable of the process that started the request.
	ParentImage string `json:"parentImage"`
	// CommandLine is the resolved path followed by the arguments.
	CommandLine string `json:"commandLine"`
	// Grant asks for a time-limited sudoers entry for the command instead of one run.
	Grant bool `json:"grant,omitempty"`
}

// Elevation decisions.
const (
	ElevationPending  = "pending"
	ElevationApproved = "approved"
	ElevationDenied   = "denied"
	ElevationIgnored  = "ignored"
	ElevationRevoked  = "revoked"
	ElevationExpired  = "expired"
)

// ElevationDecision is the server's answer on an elevation request.
type ElevationDecision struct {
	LocalID   string `json:"localId"`
	RequestID string `json:"requestId"`
	// Decision is pending, approved, denied, ignored, revoked or expired.
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	// ExpiresAt ends an approval: a grant is removed then.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// Grant, User and Path repeat the request's, for the sudoers entry of an approved grant
	// and its removal.
	Grant bool   `json:"grant,omitempty"`
	User  string `json:"user,omitempty"`
	Path  string `json:"path,omitempty"`
}
