package pam_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/pam"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

// BenchmarkDecide decides over 1,000 rules of an organization from the node's cache: the
// version check (one indexed read) and the matcher. go test -run '^$' -bench Decide ./internal/pam/
func BenchmarkDecide(b *testing.B) {
	e := apptest.New(b)
	ten := e.NewTenant(e.Admin(), "Bench")
	s := app.Service[*pam.Service](e.App)
	ctx := context.Background()
	now := store.Now()
	if err := e.App.DB.Write(ctx, func(tx *sql.Tx) error {
		for i := range 1000 {
			cmd, verdict, user := "", "auto_approve", fmt.Sprint("user", i)
			path := fmt.Sprintf("/opt/vendor%d/*", i)
			if i == 999 {
				cmd, path, verdict, user = "--install", "", "auto_deny", ""
			}
			if _, err := tx.Exec(`INSERT INTO pam_rules (id, partner_id, org_id, name, priority, verdict, approval_minutes, enabled,
				match_path_glob, match_user, match_command_line, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, 60, TRUE, $7, $8, $9, $10, $10)`,
				store.NewID(), ten.PartnerID, ten.OrgID, fmt.Sprint("r", i), i, verdict, path, user, cmd, now); err != nil {
				return err
			}
		}
		_, err := tx.Exec(`INSERT INTO pam_config (org_id, partner_id, default_verdict, rules_version, updated_at) VALUES ($1, $2, 'require_approval', 1, $3)`,
			ten.OrgID, ten.PartnerID, now)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	subj := pam.Subject{User: "alice", Path: "/usr/bin/apt-get", SHA256: "ab", CommandLine: "/usr/bin/apt-get --install vim", At: time.Now()}
	if v, err := s.Decide(ctx, ten.OrgID, subj); err != nil || v.Verdict != pam.VerdictAutoDeny {
		b.Fatal(v, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Decide(ctx, ten.OrgID, subj); err != nil {
			b.Fatal(err)
		}
	}
}
