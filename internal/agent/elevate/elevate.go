// Package elevate is the agent's side of privileged access management: the root agent
// listens on a Unix socket where a local user's `gale-agent elevate -- CMD` asks to run CMD as
// root. The agent establishes every fact itself (the user from the socket's peer credentials,
// the executable resolved with a fixed PATH and hashed, the parent process from /proc), reports
// the request to the server, and does only what the server's decision says: run the command
// once as root with the caller's terminal (its descriptors passed over the socket), or write a
// time-limited sudoers entry for exactly that user and executable, validated with visudo and
// removed at expiry or revocation (also after an agent restart).
package elevate

import (
	"log/slog"
	"os"
	"time"
)

// Defaults of Options.
const (
	DefaultSocket     = "/run/gale-agent/elevate.sock"
	DefaultSudoersDir = "/etc/sudoers.d"
	// EnvSocket and EnvSudoersDir override the defaults (tests, unusual layouts); "off" as the
	// socket turns the listener off.
	EnvSocket     = "GALE_ELEVATE_SOCKET"
	EnvSudoersDir = "GALE_ELEVATE_SUDOERS_DIR"
	// WaitLimit is how long a request waits for a decision (the server expires a pending
	// request after 10 minutes).
	WaitLimit = 11 * time.Minute
	// maxRequest bounds the client's message.
	maxRequest = 64 << 10
)

// SafePath is where a bare command name is looked up: the caller's own PATH is never used.
const SafePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Options configure the elevation service.
type Options struct {
	// Socket is the listening socket's path; SudoersDir where grants are written.
	Socket, SudoersDir string
	// Visudo is the visudo binary; default found in SafePath.
	Visudo string
	Logger *slog.Logger
}

// OptionsFromEnv returns the defaults, overridden by the environment.
func OptionsFromEnv(logger *slog.Logger) Options {
	o := Options{Socket: DefaultSocket, SudoersDir: DefaultSudoersDir, Logger: logger}
	if v := os.Getenv(EnvSocket); v != "" {
		o.Socket = v
	}
	if v := os.Getenv(EnvSudoersDir); v != "" {
		o.SudoersDir = v
	}
	return o
}

// SocketPath is the socket a client dials: the environment's, else the default.
func SocketPath() string {
	if v := os.Getenv(EnvSocket); v != "" && v != "off" {
		return v
	}
	return DefaultSocket
}

// clientRequest is what the client sends (with its stdin, stdout and stderr as SCM_RIGHTS).
type clientRequest struct {
	Argv  []string `json:"argv"`
	Grant bool     `json:"grant,omitempty"`
}

// reply is one line the agent sends back: status lines, then one exit line.
type reply struct {
	Type    string `json:"type"` // status or exit
	Message string `json:"message,omitempty"`
	Code    int    `json:"code,omitempty"`
}
