package config_test

import (
	"encoding/base64"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gale/internal/platform/config"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaultsNeedNoConfiguration(t *testing.T) {
	dir := t.TempDir()
	c, err := config.Load(env(map[string]string{"DATA_DIR": dir}), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if c.ListenAddr != ":8080" || c.DatabaseURL != "sqlite:data/gale.db" || c.Enable2FA || len(c.EncryptionKey) != 32 || len(c.JWTSecret) < 32 {
		t.Fatalf("defaults = %+v", c)
	}
	// Generated development secrets are kept and reused.
	again, err := config.Load(env(map[string]string{"DATA_DIR": dir}), slog.New(slog.DiscardHandler))
	if err != nil || string(again.JWTSecret) != string(c.JWTSecret) {
		t.Fatalf("second load generated new secrets: %v", err)
	}
	info, err := os.Stat(filepath.Join(dir, "secrets.json"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("secrets file: %v, mode %v", err, info.Mode())
	}
}

func TestInvalidSettingsAreNamed(t *testing.T) {
	for name, vars := range map[string]map[string]string{
		"ENABLE_2FA":                         {"ENABLE_2FA": "maybe"},
		"DATABASE_URL":                       {"DATABASE_URL": "mysql://x"},
		"MAX_BODY_BYTES":                     {"MAX_BODY_BYTES": "-1"},
		"TRUSTED_PROXIES":                    {"TRUSTED_PROXIES": "10.0.0.0/8, nonsense"},
		"GALE_ENV":                           {"GALE_ENV": "staging"},
		"BOOTSTRAP_ADMIN":                    {"BOOTSTRAP_ADMIN_EMAIL": "a@b.c"},
		"LOG_FORMAT":                         {"LOG_FORMAT": "xml"},
		"ARGON2_MEMORY_KIB":                  {"ARGON2_MEMORY_KIB": "lots"},
		"ENROLLMENT_KEY_DEFAULT_TTL_MINUTES": {"ENROLLMENT_KEY_DEFAULT_TTL_MINUTES": "525601"},
		"PARTNER_API_ENROLLMENT_KEY_MAX_TTL_MINUTES": {"PARTNER_API_ENROLLMENT_KEY_MAX_TTL_MINUTES": "0"},
		"WEBHOOK_ALLOW_PRIVATE_TARGETS":              {"WEBHOOK_ALLOW_PRIVATE_TARGETS": "sometimes"},
		"WEBHOOK_SENDERS":                            {"WEBHOOK_SENDERS": "0"},
		"AUTH_CACHE_MS":                              {"AUTH_CACHE_MS": "60001"},
		"LIST_PAGE_CACHE_MS":                         {"LIST_PAGE_CACHE_MS": "-1"},
		"FCM_CREDENTIALS_FILE":                       {"FCM_PROJECT_ID": "p"},
		"APNS_TOPIC":                                 {"APNS_KEY_FILE": "/k.p8", "APNS_KEY_ID": "K", "APNS_TEAM_ID": "T"},
		"NODE_ADDRESS":                               {"NODE_ADDRESS": "10.0.0.5:8080"},
		"NODE_SECRET":                                {"NODE_SECRET": "short"},
		"BLOB_STORE":                                 {"BLOB_STORE": "ftp"},
		"S3_BUCKET":                                  {"BLOB_STORE": "s3"},
		"S3_PATH_STYLE":                              {"S3_PATH_STYLE": "yes please"},
		"BLOB_MAX_BYTES":                             {"BLOB_MAX_BYTES": "-5"},
	} {
		vars["DATA_DIR"] = t.TempDir()
		_, err := config.Load(env(vars), slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v does not name the setting", name, err)
		}
	}
}

func TestEnrollmentKeyDefaultTTL(t *testing.T) {
	c, err := config.Load(env(map[string]string{"DATA_DIR": t.TempDir()}), slog.New(slog.DiscardHandler))
	if err != nil || c.EnrollmentKeyDefaultTTL != 60*time.Minute || c.PartnerAPIEnrollmentKeyDefaultTTL != 30*24*time.Hour {
		t.Fatalf("default enrollment key lifetimes = %v and %v on the partner API (%v), want 60m and 30 days",
			c.EnrollmentKeyDefaultTTL, c.PartnerAPIEnrollmentKeyDefaultTTL, err)
	}
	c, err = config.Load(env(map[string]string{"DATA_DIR": t.TempDir(), "ENROLLMENT_KEY_DEFAULT_TTL_MINUTES": "1440"}), slog.New(slog.DiscardHandler))
	if err != nil || c.EnrollmentKeyDefaultTTL != 24*time.Hour || c.PartnerAPIEnrollmentKeyDefaultTTL != 24*time.Hour {
		t.Fatalf("ENROLLMENT_KEY_DEFAULT_TTL_MINUTES=1440 gave %v and %v on the partner API (%v)", c.EnrollmentKeyDefaultTTL,
			c.PartnerAPIEnrollmentKeyDefaultTTL, err)
	}
}

func TestPartnerAPIEnrollmentKeyMaxTTL(t *testing.T) {
	c, err := config.Load(env(map[string]string{"DATA_DIR": t.TempDir()}), slog.New(slog.DiscardHandler))
	if err != nil || c.PartnerAPIEnrollmentKeyMaxTTL != 30*24*time.Hour {
		t.Fatalf("default partner API key cap = %v (%v), want 30 days", c.PartnerAPIEnrollmentKeyMaxTTL, err)
	}
	c, err = config.Load(env(map[string]string{"DATA_DIR": t.TempDir(), "PARTNER_API_ENROLLMENT_KEY_MAX_TTL_MINUTES": "120"}), slog.New(slog.DiscardHandler))
	if err != nil || c.PartnerAPIEnrollmentKeyMaxTTL != 2*time.Hour {
		t.Fatalf("PARTNER_API_ENROLLMENT_KEY_MAX_TTL_MINUTES=120 gave %v (%v)", c.PartnerAPIEnrollmentKeyMaxTTL, err)
	}
}

func TestWebhookPrivateTargets(t *testing.T) {
	c, err := config.Load(env(map[string]string{"DATA_DIR": t.TempDir()}), slog.New(slog.DiscardHandler))
	if err != nil || c.WebhookAllowPrivateTargets || c.WebhookSenders != 4 {
		t.Fatalf("webhook defaults: private targets %v, %d senders (%v)", c.WebhookAllowPrivateTargets, c.WebhookSenders, err)
	}
	c, err = config.Load(env(map[string]string{"DATA_DIR": t.TempDir(), "WEBHOOK_ALLOW_PRIVATE_TARGETS": "true"}), slog.New(slog.DiscardHandler))
	if err != nil || !c.WebhookAllowPrivateTargets {
		t.Fatalf("WEBHOOK_ALLOW_PRIVATE_TARGETS=true not applied (%v)", err)
	}
}

func TestCacheTimes(t *testing.T) {
	c, err := config.Load(env(map[string]string{"DATA_DIR": t.TempDir()}), slog.New(slog.DiscardHandler))
	if err != nil || c.AuthCacheTTL != time.Second || c.ListPageCacheTTL != time.Second {
		t.Fatalf("default cache times = %v and %v (%v), want 1s", c.AuthCacheTTL, c.ListPageCacheTTL, err)
	}
	c, err = config.Load(env(map[string]string{"DATA_DIR": t.TempDir(), "AUTH_CACHE_MS": "0", "LIST_PAGE_CACHE_MS": "250"}),
		slog.New(slog.DiscardHandler))
	if err != nil || c.AuthCacheTTL != 0 || c.ListPageCacheTTL != 250*time.Millisecond {
		t.Fatalf("AUTH_CACHE_MS=0, LIST_PAGE_CACHE_MS=250 gave %v and %v (%v)", c.AuthCacheTTL, c.ListPageCacheTTL, err)
	}
}

func TestProductionRequiresSecrets(t *testing.T) {
	vars := map[string]string{"GALE_ENV": "production", "DATA_DIR": t.TempDir()}
	if _, err := config.Load(env(vars), slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "JWT_SECRET") {
		t.Fatalf("production without secrets: %v", err)
	}
	vars["JWT_SECRET"] = strings.Repeat("s", 40)
	vars["APP_ENCRYPTION_KEY"] = base64.StdEncoding.EncodeToString([]byte("too short"))
	if _, err := config.Load(env(vars), slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "APP_ENCRYPTION_KEY") {
		t.Fatalf("short encryption key: %v", err)
	}
	vars["APP_ENCRYPTION_KEY"] = base64.StdEncoding.EncodeToString(make([]byte, 32))
	c, err := config.Load(env(vars), slog.New(slog.DiscardHandler))
	if err != nil || c.Env != "production" {
		t.Fatalf("production with secrets: %v", err)
	}
	if _, err := os.Stat(filepath.Join(vars["DATA_DIR"], "secrets.json")); !os.IsNotExist(err) {
		t.Fatal("production wrote generated secrets")
	}
}

func TestHSTSMaxAge(t *testing.T) {
	c, err := config.Load(env(map[string]string{"DATA_DIR": t.TempDir()}), slog.New(slog.DiscardHandler))
	if err != nil || c.HSTSMaxAge != 0 {
		t.Fatalf("default HSTS max age = %v (%v), want 0: off", c.HSTSMaxAge, err)
	}
	c, err = config.Load(env(map[string]string{"DATA_DIR": t.TempDir(), "HSTS_MAX_AGE": "31536000"}), slog.New(slog.DiscardHandler))
	if err != nil || c.HSTSMaxAge != 365*24*time.Hour {
		t.Fatalf("HSTS_MAX_AGE=31536000 gave %v (%v)", c.HSTSMaxAge, err)
	}
	if _, err := config.Load(env(map[string]string{"DATA_DIR": t.TempDir(), "HSTS_MAX_AGE": "-1"}), slog.New(slog.DiscardHandler)); err == nil ||
		!strings.Contains(err.Error(), "HSTS_MAX_AGE") {
		t.Fatalf("HSTS_MAX_AGE=-1: error %v does not name the setting", err)
	}
}

func TestRemoteICEServers(t *testing.T) {
	load := func(vars map[string]string) (config.Config, error) {
		vars["DATA_DIR"] = t.TempDir()
		return config.Load(env(vars), slog.New(slog.DiscardHandler))
	}
	c, err := load(map[string]string{})
	if err != nil || len(c.RemoteSTUNURLs) != 0 || len(c.RemoteTURNURLs) != 0 || c.RemoteTURNCredentialTTL != time.Hour ||
		c.RemoteFileTransferMaxBytes != 2<<30 {
		t.Fatalf("remote defaults: %v %v %s %d (%v)", c.RemoteSTUNURLs, c.RemoteTURNURLs, c.RemoteTURNCredentialTTL, c.RemoteFileTransferMaxBytes, err)
	}
	c, err = load(map[string]string{"REMOTE_STUN_URLS": "stun:a.example:3478, stuns:b.example", "REMOTE_TURN_URLS": "turn:t.example:3478?transport=udp",
		"REMOTE_TURN_SECRET": "0123456789abcdef", "REMOTE_TURN_CREDENTIAL_TTL_SECONDS": "600", "REMOTE_FILE_TRANSFER_MAX_BYTES": "1048576"})
	if err != nil || len(c.RemoteSTUNURLs) != 2 || c.RemoteSTUNURLs[1] != "stuns:b.example" || len(c.RemoteTURNURLs) != 1 ||
		c.RemoteTURNCredentialTTL != 10*time.Minute || c.RemoteFileTransferMaxBytes != 1<<20 {
		t.Fatalf("remote settings: %+v %+v %s (%v)", c.RemoteSTUNURLs, c.RemoteTURNURLs, c.RemoteTURNCredentialTTL, err)
	}
	for name, vars := range map[string]map[string]string{
		"REMOTE_STUN_URLS":                   {"REMOTE_STUN_URLS": "turn:t.example"},
		"REMOTE_TURN_URLS":                   {"REMOTE_TURN_URLS": "http://t.example"},
		"REMOTE_TURN_SECRET":                 {"REMOTE_TURN_URLS": "turn:t.example"},
		"REMOTE_TURN_CREDENTIAL_TTL_SECONDS": {"REMOTE_TURN_CREDENTIAL_TTL_SECONDS": "5"},
		"REMOTE_FILE_TRANSFER_MAX_BYTES":     {"REMOTE_FILE_TRANSFER_MAX_BYTES": "0"},
	} {
		if _, err := load(vars); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v does not name the setting", name, err)
		}
	}
}

func TestAgentBuildsDir(t *testing.T) {
	c, err := config.Load(env(map[string]string{"DATA_DIR": t.TempDir()}), slog.New(slog.DiscardHandler))
	if err != nil || c.AgentBuildsDir != "" {
		t.Fatalf("default agent builds directory = %q (%v), want none", c.AgentBuildsDir, err)
	}
	c, err = config.Load(env(map[string]string{"DATA_DIR": t.TempDir(), "AGENT_BUILDS_DIR": "/usr/lib/gale/agents"}), slog.New(slog.DiscardHandler))
	if err != nil || c.AgentBuildsDir != "/usr/lib/gale/agents" {
		t.Fatalf("AGENT_BUILDS_DIR not applied: %q (%v)", c.AgentBuildsDir, err)
	}
}
