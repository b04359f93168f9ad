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
