// Package config reads Gale's settings from environment variables and validates them at start.
package config

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"gale/internal/platform/clock"
)

// Config holds every setting of the server. Zero values are never used directly: Load fills
// defaults, so a Config built by hand (tests) should start from Defaults().
type Config struct {
	// Env is "development" (the default) or "production". Production refuses to start
	// without explicit secrets instead of generating them.
	Env        string
	ListenAddr string
	// DatabaseURL is "sqlite:PATH" or "postgres://...".
	DatabaseURL string
	// DataDir keeps generated development secrets (and the default SQLite file).
	DataDir string
	// PublicURL is the address users reach the server at; invite and reset links use it.
	PublicURL string
	// NodeAddress is the base URL other nodes reach this node at (NODE_ADDRESS), to relay
	// streams to the agents it holds; empty means nodes.DefaultAddress(ListenAddr).
	NodeAddress string
	// NodeSecret keys the requests nodes make to each other (NODE_SECRET); empty derives the
	// key from JWTSecret.
	NodeSecret string

	LogFormat string // "json" or "text"; empty picks text on a terminal, JSON otherwise
	LogLevel  slog.Level

	JWTSecret     []byte
	EncryptionKey []byte // 32 bytes, AES-256-GCM for secrets the server must read back

	BootstrapAdminEmail    string
	BootstrapAdminPassword string
	BootstrapAdminName     string

	// Enable2FA makes every tenancy-mutating write need a JWT with the claim mfa=true.
	Enable2FA bool

	// SMTPURL is smtp://user:pass@host:port (or smtps://); empty means no mail is sent and
	// invite and reset links are returned to the caller instead.
	SMTPURL  string
	SMTPFrom string

	MaxBodyBytes int64

	// Clock is the time the server's rules run on; nil is the system clock. Tests set a
	// clock.Fake to move time instead of sleeping.
	Clock clock.Clock

	// BlobStore is where files (attachments, reports, bundles) are kept: "database" (the
	// default) or "s3"; BlobMaxBytes caps one file (0: no cap). The S3 settings apply to "s3".
	BlobStore         string
	BlobMaxBytes      int64
	S3Endpoint        string
	S3Region          string
	S3Bucket          string
	S3Prefix          string
	S3AccessKeyID     string
	S3SecretAccessKey string
	// S3PathStyle puts the bucket in the URL path, as MinIO and most self-hosted stores need.
	S3PathStyle bool

	ShutdownTimeout time.Duration
	// ConsoleIdleTimeout signs a console user out after this long without a request.
	ConsoleIdleTimeout time.Duration
	// TrustedProxies are the networks whose X-Forwarded-For header is believed.
	TrustedProxies []*net.IPNet
	// HSTSMaxAge, when set (HSTS_MAX_AGE, seconds), makes every answer carry
	// Strict-Transport-Security with it; 0 sends none.
	HSTSMaxAge time.Duration

	AccessTokenTTL     time.Duration
	RefreshTokenTTL    time.Duration
	RefreshFamilyTTL   time.Duration
	InviteTTL          time.Duration
	PasswordResetTTL   time.Duration
	Argon2MemoryKiB    uint32
	Argon2Iterations   uint32
	Argon2Parallelism  uint8
	LoginResponseFloor time.Duration
	// AuthCacheTTL is how long a node keeps an access token's principal (AUTH_CACHE_MS); writes
	// through the API end it at once on every node.
	AuthCacheTTL time.Duration
	// ListPageCacheTTL is how long a node keeps which rows made a page of organizations
	// (LIST_PAGE_CACHE_MS); writes through the API end it at once on every node.
	ListPageCacheTTL time.Duration

	// AgentBuildsDir is AGENT_BUILDS_DIR: where gale serve finds agent builds shipped with the
	// server (<dir>/<version>/gale-agent-<os>-<arch>[.exe]) to register at start. Empty: none.
	AgentBuildsDir string

	// EnrollmentSecret is AGENT_ENROLLMENT_SECRET: what agents present with keys that have no
	// secret of their own. Empty means such keys cannot enroll.
	EnrollmentSecret string
	// AgentHeartbeatInterval is the heartbeat period the server gives agents.
	AgentHeartbeatInterval time.Duration
	// AgentPingInterval is how often the server pings an agent's live channel.
	AgentPingInterval time.Duration
	// AgentChannelWait is how long a request that needs an agent's live channel waits for it
	// when the agent reported it is opening it (AGENT_CHANNEL_WAIT_MS); zero waits not at all.
	AgentChannelWait time.Duration
	// DeviceOfflineAfter marks a device offline after this long without a heartbeat.
	DeviceOfflineAfter time.Duration
	// AgentSilentAfter sets mainAgentSilentSince when the watchdog reports but the main agent
	// has been quiet this long.
	AgentSilentAfter time.Duration
	// DeviceMetricsRetention is how long each device's metrics history is kept.
	DeviceMetricsRetention time.Duration
	// SNMPMetricsRetention is how long SNMP devices' metric samples are kept.
	SNMPMetricsRetention time.Duration
	// MonitorResultsRetention is how long monitors' check results are kept.
	MonitorResultsRetention time.Duration
	// SecurityStatusInterval is how old a device's security status may grow before the
	// security domain asks its agent for a fresh one.
	SecurityStatusInterval time.Duration
	// EDRPollEvery is how often the incidents poller looks for EDR connectors that are due
	// (each connector is polled at its own interval, no more often than this).
	EDRPollEvery time.Duration
	// DeviceProvisionTTL is the lifetime of a provisioned device's enrollment payload.
	DeviceProvisionTTL time.Duration
	// AgentEnrollPerMinute limits enrollments per client address (0: no limit).
	AgentEnrollPerMinute int
	// EnrollmentKeyDefaultTTL is the lifetime of an enrollment key created without ttlMinutes
	// or expiresAt (still clamped by the organization's cap).
	EnrollmentKeyDefaultTTL time.Duration
	// PartnerAPIEnrollmentKeyDefaultTTL is that lifetime for keys minted through the partner
	// API: 30 days, or ENROLLMENT_KEY_DEFAULT_TTL_MINUTES when set (clamped by the caps).
	PartnerAPIEnrollmentKeyDefaultTTL time.Duration
	// PartnerAPIEnrollmentKeyMaxTTL is the longest lifetime of an enrollment key minted through
	// the partner API (PARTNER_API_ENROLLMENT_KEY_MAX_TTL_MINUTES), on top of the
	// organization's own cap.
	PartnerAPIEnrollmentKeyMaxTTL time.Duration
	// WebhookAllowPrivateTargets lets outbound webhooks reach loopback, private, link-local,
	// unique-local and unspecified addresses (WEBHOOK_ALLOW_PRIVATE_TARGETS); false refuses
	// them at create and again when connecting.
	WebhookAllowPrivateTargets bool
	// WebhookSenders is how many webhook deliveries a node sends at once (WEBHOOK_SENDERS).
	WebhookSenders int
	// TunnelAllowDeviceLocal lets tunnels that name a loopback or link-local address of their
	// device (127.0.0.0/8, ::1, localhost, 169.254.0.0/16, fe80::/10) be created and reach it
	// (TUNNEL_ALLOW_DEVICE_LOCAL); false refuses them, and agents refuse such addresses.
	TunnelAllowDeviceLocal bool
	// TunnelMaxResponseBytes caps one answer through a tunnel, and one request body
	// (TUNNEL_MAX_RESPONSE_BYTES).
	TunnelMaxResponseBytes int64
	// TunnelResponseTimeout is how long a tunnel waits for the target's response headers
	// (TUNNEL_RESPONSE_TIMEOUT_SECONDS).
	TunnelResponseTimeout time.Duration
	// RemoteSTUNURLs and RemoteTURNURLs are the ICE servers remote desktops may use
	// (REMOTE_STUN_URLS, REMOTE_TURN_URLS: comma lists of stun:, stuns:, turn: or turns: URLs);
	// empty: none, peers connect directly. TURN needs RemoteTURNSecret (REMOTE_TURN_SECRET, the
	// TURN server's static-auth-secret), from which each viewer gets credentials valid for
	// RemoteTURNCredentialTTL (REMOTE_TURN_CREDENTIAL_TTL_SECONDS).
	RemoteSTUNURLs          []string
	RemoteTURNURLs          []string
	RemoteTURNSecret        string
	RemoteTURNCredentialTTL time.Duration
	// RemoteFileTransferMaxBytes caps one file moved through a file_transfer remote session,
	// either way (REMOTE_FILE_TRANSFER_MAX_BYTES).
	RemoteFileTransferMaxBytes int64
	// ListCacheRows is how many rows of each cached list (organizations, devices) a node keeps
	// decoded in memory (LIST_CACHE_ROWS); 0 reads every row of every page.
	ListCacheRows int
	// APIMaxInFlight is how many API requests (agents' not counted) a node serves at once
	// (API_MAX_IN_FLIGHT, 0: no bound); APIQueueLength how many may wait for their turn
	// (API_QUEUE_LENGTH) and APIQueueWait for how long (API_QUEUE_WAIT_MS), before the node
	// answers 503 SERVER_BUSY with Retry-After.
	APIMaxInFlight, APIQueueLength int
	APIQueueWait                   time.Duration
	// Push to Android through FCM HTTP v1: FCMProjectID (FCM_PROJECT_ID) and the service
	// account JSON file FCMCredentialsFile (FCM_CREDENTIALS_FILE); FCMEndpoint (FCM_ENDPOINT)
	// overrides https://fcm.googleapis.com. Empty: no Android push.
	FCMProjectID, FCMCredentialsFile, FCMEndpoint string
	// Push to iPhones through APNs: the .p8 key file (APNS_KEY_FILE), its key ID
	// (APNS_KEY_ID), the team ID (APNS_TEAM_ID), the app's bundle ID (APNS_TOPIC) and the
	// endpoint (APNS_ENDPOINT, default https://api.push.apple.com). Empty key file: no iOS push.
	APNsKeyFile, APNsKeyID, APNsTeamID, APNsTopic, APNsEndpoint string
}

// Defaults returns the configuration used when no variable is set.
func Defaults() Config {
	return Config{
		Env:                "development",
		ListenAddr:         ":8080",
		DatabaseURL:        "sqlite:data/gale.db",
		DataDir:            "data",
		PublicURL:          "http://localhost:8080",
		LogLevel:           slog.LevelInfo,
		BootstrapAdminName: "Administrator",
		SMTPFrom:           "gale@localhost",
		MaxBodyBytes:       1 << 20,
		BlobStore:          "database",
		S3PathStyle:        true,
		ShutdownTimeout:    30 * time.Second,
		ConsoleIdleTimeout: time.Hour,
		AccessTokenTTL:     15 * time.Minute,
		RefreshTokenTTL:    7 * 24 * time.Hour,
		RefreshFamilyTTL:   30 * 24 * time.Hour,
		InviteTTL:          7 * 24 * time.Hour,
		PasswordResetTTL:   time.Hour,
		Argon2MemoryKiB:    64 * 1024,
		Argon2Iterations:   3,
		Argon2Parallelism:  4,
		LoginResponseFloor: 350 * time.Millisecond,
		AuthCacheTTL:       time.Second,
		ListPageCacheTTL:   time.Second,

		AgentHeartbeatInterval:  60 * time.Second,
		AgentPingInterval:       30 * time.Second,
		AgentChannelWait:        5 * time.Second,
		DeviceOfflineAfter:      5 * time.Minute,
		AgentSilentAfter:        15 * time.Minute,
		DeviceMetricsRetention:  6 * time.Hour,
		DeviceProvisionTTL:      7 * 24 * time.Hour,
		SNMPMetricsRetention:    30 * 24 * time.Hour,
		MonitorResultsRetention: 30 * 24 * time.Hour,
		EDRPollEvery:            30 * time.Second,
		SecurityStatusInterval:  6 * time.Hour,
		AgentEnrollPerMinute:    10,
		EnrollmentKeyDefaultTTL: 60 * time.Minute,

		PartnerAPIEnrollmentKeyDefaultTTL: 30 * 24 * time.Hour,
		PartnerAPIEnrollmentKeyMaxTTL:     30 * 24 * time.Hour,
		WebhookSenders:                    4,
		TunnelMaxResponseBytes:            100 << 20,
		TunnelResponseTimeout:             60 * time.Second,
		ListCacheRows:                     20000,
		// Enough requests in flight to keep every core busy while some wait on the database,
		// and a queue a busy console's clients fit in; a request that waited ten seconds is
		// better told to come back.
		APIMaxInFlight:             max(8, 4*runtime.GOMAXPROCS(0)),
		APIQueueLength:             128,
		APIQueueWait:               10 * time.Second,
		RemoteTURNCredentialTTL:    time.Hour,
		RemoteFileTransferMaxBytes: 2 << 30,
	}
}

// Load reads the environment (through getenv) over Defaults and validates the result.
// Missing secrets are generated once and kept in DataDir in development; production
// requires them.
func Load(getenv func(string) string, logger *slog.Logger) (Config, error) {
	c := Defaults()
	var errs []error
	str := func(name string, dst *string) {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			*dst = v
		}
	}
	str("GALE_ENV", &c.Env)
	str("LISTEN_ADDR", &c.ListenAddr)
	str("DATABASE_URL", &c.DatabaseURL)
	str("DATA_DIR", &c.DataDir)
	str("PUBLIC_URL", &c.PublicURL)
	str("LOG_FORMAT", &c.LogFormat)
	str("BOOTSTRAP_ADMIN_EMAIL", &c.BootstrapAdminEmail)
	str("BOOTSTRAP_ADMIN_NAME", &c.BootstrapAdminName)
	str("SMTP_URL", &c.SMTPURL)
	str("SMTP_FROM", &c.SMTPFrom)
	for name, dst := range map[string]*string{"BLOB_STORE": &c.BlobStore, "S3_ENDPOINT": &c.S3Endpoint, "S3_REGION": &c.S3Region,
		"S3_BUCKET": &c.S3Bucket, "S3_PREFIX": &c.S3Prefix, "S3_ACCESS_KEY_ID": &c.S3AccessKeyID} {
		str(name, dst)
	}
	c.S3SecretAccessKey = getenv("S3_SECRET_ACCESS_KEY")
	if c.BlobStore != "database" && c.BlobStore != "s3" {
		errs = append(errs, fmt.Errorf("BLOB_STORE must be database or s3, got %q", c.BlobStore))
	}
	if c.BlobStore == "s3" && c.S3Bucket == "" {
		errs = append(errs, errors.New("BLOB_STORE=s3 needs S3_BUCKET"))
	}
	if v := getenv("S3_PATH_STYLE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("S3_PATH_STYLE must be true or false, got %q", v))
		}
		c.S3PathStyle = b
	}
	for name, dst := range map[string]*string{"FCM_PROJECT_ID": &c.FCMProjectID, "FCM_CREDENTIALS_FILE": &c.FCMCredentialsFile,
		"FCM_ENDPOINT": &c.FCMEndpoint, "APNS_KEY_FILE": &c.APNsKeyFile, "APNS_KEY_ID": &c.APNsKeyID, "APNS_TEAM_ID": &c.APNsTeamID,
		"APNS_TOPIC": &c.APNsTopic, "APNS_ENDPOINT": &c.APNsEndpoint} {
		str(name, dst)
	}
	if (c.FCMProjectID == "") != (c.FCMCredentialsFile == "") {
		errs = append(errs, errors.New("set both FCM_PROJECT_ID and FCM_CREDENTIALS_FILE, or neither"))
	}
	if c.APNsKeyFile != "" && (c.APNsKeyID == "" || c.APNsTeamID == "" || c.APNsTopic == "") {
		errs = append(errs, errors.New("APNS_KEY_FILE needs APNS_KEY_ID, APNS_TEAM_ID and APNS_TOPIC"))
	}
	c.BootstrapAdminPassword = getenv("BOOTSTRAP_ADMIN_PASSWORD")
	c.EnrollmentSecret = getenv("AGENT_ENROLLMENT_SECRET")
	str("AGENT_BUILDS_DIR", &c.AgentBuildsDir)
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	str("NODE_ADDRESS", &c.NodeAddress)
	c.NodeAddress = strings.TrimRight(c.NodeAddress, "/")
	if c.NodeAddress != "" {
		if u, err := url.Parse(c.NodeAddress); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" {
			errs = append(errs, fmt.Errorf("NODE_ADDRESS must be http:// or https:// with a host and no path, like http://10.0.0.5:8080; got %q", c.NodeAddress))
		}
	}
	c.NodeSecret = getenv("NODE_SECRET")
	if c.NodeSecret != "" && len(c.NodeSecret) < 32 {
		errs = append(errs, errors.New("NODE_SECRET must be at least 32 characters"))
	}

	if v := getenv("LOG_LEVEL"); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			errs = append(errs, fmt.Errorf("LOG_LEVEL: %w", err))
		}
	}
	if c.Env != "development" && c.Env != "production" {
		errs = append(errs, fmt.Errorf("GALE_ENV must be development or production, got %q", c.Env))
	}
	if c.LogFormat != "" && c.LogFormat != "json" && c.LogFormat != "text" {
		errs = append(errs, fmt.Errorf("LOG_FORMAT must be json or text, got %q", c.LogFormat))
	}
	if v := getenv("ENABLE_2FA"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("ENABLE_2FA must be true or false, got %q", v))
		}
		c.Enable2FA = b
	}
	if v := getenv("WEBHOOK_ALLOW_PRIVATE_TARGETS"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("WEBHOOK_ALLOW_PRIVATE_TARGETS must be true or false, got %q", v))
		}
		c.WebhookAllowPrivateTargets = b
	}
	if v := getenv("TUNNEL_ALLOW_DEVICE_LOCAL"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("TUNNEL_ALLOW_DEVICE_LOCAL must be true or false, got %q", v))
		}
		c.TunnelAllowDeviceLocal = b
	}
	intVar := func(name string, min, max int64, set func(int64)) {
		v := getenv(name)
		if v == "" {
			return
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < min || n > max {
			errs = append(errs, fmt.Errorf("%s must be an integer from %d to %d, got %q", name, min, max, v))
			return
		}
		set(n)
	}
	intVar("MAX_BODY_BYTES", 1024, 1<<30, func(n int64) { c.MaxBodyBytes = n })
	intVar("BLOB_MAX_BYTES", 0, 1<<40, func(n int64) { c.BlobMaxBytes = n })
	intVar("SHUTDOWN_TIMEOUT_SECONDS", 1, 3600, func(n int64) { c.ShutdownTimeout = time.Duration(n) * time.Second })
	intVar("CONSOLE_IDLE_MINUTES", 5, 24*60, func(n int64) { c.ConsoleIdleTimeout = time.Duration(n) * time.Minute })
	intVar("INVITE_TTL_HOURS", 1, 24*90, func(n int64) { c.InviteTTL = time.Duration(n) * time.Hour })
	intVar("ENROLLMENT_KEY_DEFAULT_TTL_MINUTES", 1, 525600, func(n int64) {
		c.EnrollmentKeyDefaultTTL = time.Duration(n) * time.Minute
		c.PartnerAPIEnrollmentKeyDefaultTTL = c.EnrollmentKeyDefaultTTL
	})
	intVar("PARTNER_API_ENROLLMENT_KEY_MAX_TTL_MINUTES", 1, 525600, func(n int64) {
		c.PartnerAPIEnrollmentKeyMaxTTL = time.Duration(n) * time.Minute
	})
	intVar("ARGON2_MEMORY_KIB", 8, 4<<20, func(n int64) { c.Argon2MemoryKiB = uint32(n) })
	intVar("ARGON2_ITERATIONS", 1, 100, func(n int64) { c.Argon2Iterations = uint32(n) })
	intVar("ARGON2_PARALLELISM", 1, 64, func(n int64) { c.Argon2Parallelism = uint8(n) })
	seconds := func(d *time.Duration) func(int64) { return func(n int64) { *d = time.Duration(n) * time.Second } }
	intVar("AGENT_HEARTBEAT_INTERVAL_SECONDS", 5, 3600, seconds(&c.AgentHeartbeatInterval))
	intVar("AGENT_PING_INTERVAL_SECONDS", 5, 600, seconds(&c.AgentPingInterval))
	intVar("AGENT_CHANNEL_WAIT_MS", 0, 30000, func(n int64) { c.AgentChannelWait = time.Duration(n) * time.Millisecond })
	intVar("DEVICE_OFFLINE_AFTER_SECONDS", 15, 86400, seconds(&c.DeviceOfflineAfter))
	intVar("AGENT_SILENT_AFTER_SECONDS", 60, 86400, seconds(&c.AgentSilentAfter))
	intVar("HSTS_MAX_AGE", 0, 2*365*86400, seconds(&c.HSTSMaxAge))
	intVar("DEVICE_METRICS_RETENTION_HOURS", 1, 24*90, func(n int64) { c.DeviceMetricsRetention = time.Duration(n) * time.Hour })
	intVar("SNMP_METRICS_RETENTION_DAYS", 1, 3650, func(n int64) { c.SNMPMetricsRetention = time.Duration(n) * 24 * time.Hour })
	intVar("MONITOR_RESULTS_RETENTION_DAYS", 1, 3650, func(n int64) { c.MonitorResultsRetention = time.Duration(n) * 24 * time.Hour })
	intVar("SECURITY_STATUS_INTERVAL_MINUTES", 5, 7*24*60, func(n int64) { c.SecurityStatusInterval = time.Duration(n) * time.Minute })
	intVar("EDR_POLL_EVERY_SECONDS", 5, 3600, seconds(&c.EDRPollEvery))
	intVar("DEVICE_PROVISION_TTL_HOURS", 1, 24*365, func(n int64) { c.DeviceProvisionTTL = time.Duration(n) * time.Hour })
	intVar("AGENT_ENROLL_RATE_PER_MINUTE", 0, 100000, func(n int64) { c.AgentEnrollPerMinute = int(n) })
	intVar("WEBHOOK_SENDERS", 1, 64, func(n int64) { c.WebhookSenders = int(n) })
	intVar("TUNNEL_MAX_RESPONSE_BYTES", 1024, 1<<40, func(n int64) { c.TunnelMaxResponseBytes = n })
	intVar("TUNNEL_RESPONSE_TIMEOUT_SECONDS", 1, 3600, seconds(&c.TunnelResponseTimeout))
	intVar("LIST_CACHE_ROWS", 0, 10_000_000, func(n int64) { c.ListCacheRows = int(n) })
	intVar("API_MAX_IN_FLIGHT", 0, 100_000, func(n int64) { c.APIMaxInFlight = int(n) })
	intVar("API_QUEUE_LENGTH", 0, 1_000_000, func(n int64) { c.APIQueueLength = int(n) })
	intVar("API_QUEUE_WAIT_MS", 0, 600_000, func(n int64) { c.APIQueueWait = time.Duration(n) * time.Millisecond })
	intVar("AUTH_CACHE_MS", 0, 60_000, func(n int64) { c.AuthCacheTTL = time.Duration(n) * time.Millisecond })
	intVar("LIST_PAGE_CACHE_MS", 0, 60_000, func(n int64) { c.ListPageCacheTTL = time.Duration(n) * time.Millisecond })

	if v := getenv("TRUSTED_PROXIES"); v != "" {
		for _, part := range strings.Split(v, ",") {
			_, n, err := net.ParseCIDR(strings.TrimSpace(part))
			if err != nil {
				errs = append(errs, fmt.Errorf("TRUSTED_PROXIES: %q is not a CIDR", part))
				continue
			}
			c.TrustedProxies = append(c.TrustedProxies, n)
		}
	}
	intVar("REMOTE_TURN_CREDENTIAL_TTL_SECONDS", 60, 7*86400, seconds(&c.RemoteTURNCredentialTTL))
	intVar("REMOTE_FILE_TRANSFER_MAX_BYTES", 1, 1<<40, func(n int64) { c.RemoteFileTransferMaxBytes = n })
	c.RemoteTURNSecret = getenv("REMOTE_TURN_SECRET")
	for _, v := range []struct {
		name    string
		dst     *[]string
		schemes []string
	}{{"REMOTE_STUN_URLS", &c.RemoteSTUNURLs, []string{"stun:", "stuns:"}}, {"REMOTE_TURN_URLS", &c.RemoteTURNURLs, []string{"turn:", "turns:"}}} {
		for _, part := range strings.Split(getenv(v.name), ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			if !slices.ContainsFunc(v.schemes, func(p string) bool { return strings.HasPrefix(part, p) && len(part) > len(p) }) {
				errs = append(errs, fmt.Errorf("%s: %q must start with %s", v.name, part, strings.Join(v.schemes, " or ")))
				continue
			}
			*v.dst = append(*v.dst, part)
		}
	}
	if len(c.RemoteTURNURLs) > 0 && len(c.RemoteTURNSecret) < 16 {
		errs = append(errs, errors.New("REMOTE_TURN_URLS needs REMOTE_TURN_SECRET (at least 16 characters), the TURN server's shared secret"))
	}
	if !strings.HasPrefix(c.DatabaseURL, "sqlite:") && !strings.HasPrefix(c.DatabaseURL, "postgres://") &&
		!strings.HasPrefix(c.DatabaseURL, "postgresql://") {
		errs = append(errs, fmt.Errorf("DATABASE_URL must start with sqlite: or postgres://"))
	}
	if (c.BootstrapAdminEmail == "") != (c.BootstrapAdminPassword == "") {
		errs = append(errs, errors.New("set both BOOTSTRAP_ADMIN_EMAIL and BOOTSTRAP_ADMIN_PASSWORD, or neither"))
	}
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	if err := c.loadSecrets(getenv, logger); err != nil {
		return c, err
	}
	return c, nil
}

// generatedSecrets is the file kept in DataDir when development secrets are generated.
type generatedSecrets struct {
	JWTSecret     string `json:"jwtSecret"`
	EncryptionKey string `json:"encryptionKey"`
}

func (c *Config) loadSecrets(getenv func(string) string, logger *slog.Logger) error {
	jwtVal, encVal := getenv("JWT_SECRET"), getenv("APP_ENCRYPTION_KEY")
	if (jwtVal == "" || encVal == "") && c.Env == "production" {
		return errors.New("production mode needs JWT_SECRET and APP_ENCRYPTION_KEY (32 bytes, base64); generate one with: openssl rand -base64 32")
	}
	if jwtVal == "" || encVal == "" {
		stored, err := c.developmentSecrets(logger)
		if err != nil {
			return err
		}
		if jwtVal == "" {
			jwtVal = stored.JWTSecret
		}
		if encVal == "" {
			encVal = stored.EncryptionKey
		}
	}
	if len(jwtVal) < 32 {
		return errors.New("JWT_SECRET must be at least 32 characters")
	}
	c.JWTSecret = []byte(jwtVal)
	key, err := base64.StdEncoding.DecodeString(encVal)
	if err != nil || len(key) != 32 {
		return errors.New("APP_ENCRYPTION_KEY must be 32 bytes, base64-encoded (openssl rand -base64 32)")
	}
	c.EncryptionKey = key
	return nil
}

func (c *Config) developmentSecrets(logger *slog.Logger) (generatedSecrets, error) {
	path := filepath.Join(c.DataDir, "secrets.json")
	var s generatedSecrets
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &s); err != nil {
			return s, fmt.Errorf("read %s: %w (delete it to generate new secrets)", path, err)
		}
		return s, nil
	}
	s = generatedSecrets{JWTSecret: randomBase64(48), EncryptionKey: randomBase64(32)}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return s, fmt.Errorf("create data directory: %w", err)
	}
	b, _ := json.MarshalIndent(s, "", "  ")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return s, fmt.Errorf("write %s: %w", path, err)
	}
	logger.Warn("generated development secrets; set JWT_SECRET and APP_ENCRYPTION_KEY in production", "file", path)
	return s, nil
}

func randomBase64(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}
