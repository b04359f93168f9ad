package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"gale/internal/platform/config"
	"gale/internal/platform/store"
	"gale/internal/platform/store/storetest"
	"gale/internal/testkit/apptest"
)

// gale backup copies the database of a running server while it takes writes; gale restore
// refuses to replace the running server's database, puts the copy in a new place, and a
// server started there finds every write acknowledged before the backup began.
func TestBackupWhileWritingThenRestore(t *testing.T) {
	t.Setenv("DATA_DIR", t.TempDir())
	t.Setenv("LOG_LEVEL", "error")
	// Backups are SQLite's, whatever the backend of the other tests.
	dbURL := storetest.SQLiteURL(t)
	withDB := func(u string) apptest.Option { return func(c *config.Config) { c.DatabaseURL = u } }
	env := apptest.New(t, withDB(dbURL))
	admin := env.Admin()
	partnerID := env.CreatePartner(admin, "Backup MSP")

	var mu sync.Mutex
	var acked []string
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			name := fmt.Sprintf("Org %05d", i)
			body, _ := json.Marshal(map[string]any{"name": name, "partnerId": partnerID})
			req, _ := http.NewRequest("POST", env.Server.URL+"/api/v1/orgs/organizations", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+admin.Token)
			res, err := env.Server.Client().Do(req)
			if err != nil {
				done <- err
				return
			}
			res.Body.Close()
			if res.StatusCode != http.StatusCreated {
				done <- fmt.Errorf("create %s: %d", name, res.StatusCode)
				return
			}
			mu.Lock()
			acked = append(acked, name)
			mu.Unlock()
		}
	}()
	waitFor := func(n int) {
		for {
			mu.Lock()
			got := len(acked)
			mu.Unlock()
			if got >= n {
				return
			}
			select {
			case err := <-done:
				t.Fatalf("writer stopped: %v", err)
			default:
			}
		}
	}
	waitFor(10)
	mu.Lock()
	before := append([]string(nil), acked...)
	mu.Unlock()

	file := filepath.Join(t.TempDir(), "gale-backup.db")
	out, err := gale(t, "backup", "--database-url", dbURL, file)
	if err != nil || !strings.Contains(out, "backup written: "+file) || !strings.Contains(out, "integrity check ok") {
		t.Fatalf("gale backup: %v\n%s", err, out)
	}
	waitFor(len(before) + 10) // the server kept taking writes
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("writer: %v", err)
	}
	t.Logf("%d writes acknowledged before the backup began, %d in all", len(before), len(acked))
	if _, err := gale(t, "backup", "--database-url", dbURL, file); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("a second backup to the same file: %v", err)
	}

	// The server still runs on its database: a restore over it is refused.
	if _, err := gale(t, "restore", "--database-url", dbURL, file); err == nil || !strings.Contains(err.Error(), "stop it, then restore again") {
		t.Fatalf("restore over the running server's database: %v", err)
	}
	env.Must(http.StatusOK, admin, "GET", "/api/v1/orgs/organizations?limit=1", nil)

	restored := filepath.Join(t.TempDir(), "data", "gale.db")
	out, err = gale(t, "restore", "--database-url", "sqlite:"+restored, file)
	if err != nil || !strings.Contains(out, "restored "+file+" to "+restored) || strings.Contains(out, "kept as") {
		t.Fatalf("gale restore: %v\n%s", err, out)
	}

	again := apptest.New(t, withDB("sqlite:"+restored))
	c := again.Admin()
	found := map[string]bool{}
	for cursor := ""; ; {
		var page struct {
			Data []struct {
				Name string `json:"name"`
			} `json:"data"`
			Pagination struct {
				HasMore bool   `json:"hasMore"`
				Cursor  string `json:"cursor"`
			} `json:"pagination"`
		}
		again.Must(http.StatusOK, c, "GET", "/api/v1/orgs/organizations?limit=100&partnerId="+partnerID+"&cursor="+url.QueryEscape(cursor), nil).
			JSON(t, &page)
		for _, o := range page.Data {
			found[o.Name] = true
		}
		if !page.Pagination.HasMore {
			break
		}
		cursor = page.Pagination.Cursor
	}
	for _, name := range before {
		if !found[name] {
			t.Errorf("%s, acknowledged before the backup began, is missing from the restored database", name)
		}
	}
	check, err := store.QueryStrings(t.Context(), again.App.DB.SQL, `PRAGMA integrity_check`)
	if err != nil || len(check) != 1 || check[0] != "ok" {
		t.Fatalf("integrity_check of the restored database: %v %v", check, err)
	}
}

// On PostgreSQL both commands refuse, and say what to use instead.
func TestBackupAndRestoreSendPostgreSQLToItsTools(t *testing.T) {
	t.Setenv("DATA_DIR", t.TempDir())
	t.Setenv("DATABASE_URL", "postgres://nowhere.invalid/gale")
	file := filepath.Join(t.TempDir(), "backup.db")
	if _, err := gale(t, "backup", file); err == nil || !strings.Contains(err.Error(), "pg_dump -Fc") {
		t.Fatalf("gale backup on PostgreSQL: %v", err)
	}
	if _, err := gale(t, "restore", file); err == nil || !strings.Contains(err.Error(), "pg_restore") {
		t.Fatalf("gale restore on PostgreSQL: %v", err)
	}
	if _, err := os.Stat(file); err == nil {
		t.Fatal("gale backup on PostgreSQL wrote a file")
	}
}
