package agentproto

// SNMP versions and the v3 protocols an agent polls with.
const (
	SNMPv1  = "v1"
	SNMPv2c = "v2c"
	SNMPv3  = "v3"
)

// SNMPTarget is an SNMP agent to query and the credentials to query it with, as the server
// sends them (decrypted) to the agent that polls on its behalf. Used by SNMP polls and by
// network discovery's identification of what answers.
type SNMPTarget struct {
	Host    string `json:"host"`
	Port    int    `json:"port"`
	Version string `json:"version"`
	// Community is the v1 and v2c community.
	Community string `json:"community,omitempty"`
	// V3 holds the user-based security of a v3 target.
	V3 *SNMPv3Auth `json:"v3,omitempty"`
	// TimeoutMs bounds each request; Retries is how often a request is tried again.
	TimeoutMs int `json:"timeoutMs,omitempty"`
	Retries   int `json:"retries,omitempty"`
}

// SNMPv3Auth is a v3 user: noAuthNoPriv without protocols, authNoPriv with AuthProtocol
// (MD5, SHA, SHA-256) and AuthPassword, authPriv with PrivProtocol (DES, AES, AES-256) and
// PrivPassword as well.
type SNMPv3Auth struct {
	Username     string `json:"username"`
	AuthProtocol string `json:"authProtocol,omitempty"`
	AuthPassword string `json:"authPassword,omitempty"`
	PrivProtocol string `json:"privProtocol,omitempty"`
	PrivPassword string `json:"privPassword,omitempty"`
}

// SNMPValue is one variable an SNMP agent answered: its numeric OID, its type (integer,
// counter32, counter64, gauge32, timeticks, octet_string, oid, ip_address, ...), and its value
// as a number (Number) or as text (Text).
type SNMPValue struct {
	OID    string   `json:"oid"`
	Type   string   `json:"type"`
	Number *float64 `json:"number,omitempty"`
	Text   *string  `json:"text,omitempty"`
}

// SNMP work of the agent that polls on the server's behalf.
const (
	// CallSNMPPoll asks several SNMP agents for their values (args SNMPPoll, result
	// SNMPPollResult). A target that fails is reported as such. It is a call, not a command:
	// its arguments carry the targets' credentials, which must not rest in command history.
	CallSNMPPoll = "snmp_poll"
	// CallSNMPGet asks one SNMP agent for OIDs (args SNMPGet, result SNMPGetResult).
	CallSNMPGet = "snmp_get"
	// CallSNMPTest asks one SNMP agent for the MIB-2 system group (args SNMPGet without OIDs,
	// result SNMPGetResult).
	CallSNMPTest = "snmp_test"
)

// Kinds of SNMPError.
const (
	// SNMPErrTimeout: no answer in time (an unreachable host, no SNMP agent, or, for v1 and
	// v2c, a community the agent does not accept: it stays silent).
	SNMPErrTimeout = "timeout"
	// SNMPErrAuth: a v3 agent refused the user, its keys or its security level.
	SNMPErrAuth = "authentication"
	// SNMPErrFailed: anything else (a refused address, an SNMP error status).
	SNMPErrFailed = "failed"
)

// MaxSNMPPollTargets bounds the targets of one snmp_poll call; MaxSNMPOIDs the OIDs asked
// of one target.
const (
	MaxSNMPPollTargets = 1000
	MaxSNMPOIDs        = 500
)

// SNMPError is why an SNMP request failed.
type SNMPError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// SNMPPoll is the argument of snmp_poll.
type SNMPPoll struct {
	Targets []SNMPPollTarget `json:"targets"`
}

// SNMPPollTarget is one SNMP agent to poll; ID is the server's name for it, echoed back.
type SNMPPollTarget struct {
	ID     string     `json:"id"`
	Target SNMPTarget `json:"target"`
	OIDs   []string   `json:"oids"`
}

// SNMPPollResult is the result of snmp_poll: one entry per target, in any order.
type SNMPPollResult struct {
	Results []SNMPTargetResult `json:"results"`
}

// SNMPTargetResult is what one target answered (Values) or why it did not (Error).
type SNMPTargetResult struct {
	ID     string      `json:"id"`
	Values []SNMPValue `json:"values,omitempty"`
	Error  *SNMPError  `json:"error,omitempty"`
}

// SNMPGet is the argument of snmp_get and snmp_test.
type SNMPGet struct {
	Target SNMPTarget `json:"target"`
	OIDs   []string   `json:"oids,omitempty"`
}

// SNMPGetResult is the answer of snmp_get and snmp_test: the values, or why there are none.
type SNMPGetResult struct {
	Values []SNMPValue `json:"values,omitempty"`
	Error  *SNMPError  `json:"error,omitempty"`
}
