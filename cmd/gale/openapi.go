package main

import (
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"gale/internal/app"
	"gale/internal/platform/config"
)

// openapiCmd prints the OpenAPI document the server serves at /api/v1/openapi.json. It wires
// the server on a throwaway SQLite database in a temporary directory, so it needs no
// configuration and no running database, and leaves nothing behind.
func openapiCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "openapi",
		Short: "Print the OpenAPI document of the REST API (JSON)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := os.MkdirTemp("", "gale-openapi-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			cfg := config.Defaults()
			cfg.DataDir = dir
			cfg.DatabaseURL = "sqlite:" + filepath.Join(dir, "gale.db")
			cfg.JWTSecret, cfg.EncryptionKey = make([]byte, 32), make([]byte, 32)
			_, _ = rand.Read(cfg.JWTSecret)
			_, _ = rand.Read(cfg.EncryptionKey)
			a, err := app.New(cmd.Context(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				return err
			}
			defer a.Close()
			doc, err := json.MarshalIndent(a.HTTP.API.OpenAPI(), "", "  ")
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(append(doc, '\n'))
			return err
		},
	}
}
