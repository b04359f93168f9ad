package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"gale/internal/app"
	"gale/internal/domains/agentdist"
	"gale/internal/platform/apperr"
)

func agentReleaseCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "agent-release", Short: "Register and promote gale-agent binaries that endpoints download"}

	var version, goos, arch, file, notes string
	register := &cobra.Command{
		Use:   "register",
		Short: "Register one gale-agent binary for a version and platform",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := openApp(cmd.Context())
			if err != nil {
				return err
			}
			defer a.Close()
			f, err := os.Open(file)
			if err != nil {
				return err
			}
			defer f.Close()
			b, created, err := app.Service[*agentdist.Service](a).Register(cmd.Context(), version, goos, arch, f, notes)
			if err != nil {
				return cliError(err)
			}
			printRegistered(cmd, b, created)
			return nil
		},
	}
	register.Flags().StringVar(&version, "version", "", "agent version, e.g. 1.2.3 (required)")
	register.Flags().StringVar(&goos, "os", "", "linux, windows or darwin (required)")
	register.Flags().StringVar(&arch, "arch", "", "amd64 or arm64 (required)")
	register.Flags().StringVar(&file, "file", "", "path of the binary (required)")
	register.Flags().StringVar(&notes, "notes", "", "release notes")
	for _, f := range []string{"version", "os", "arch", "file"} {
		_ = register.MarkFlagRequired(f)
	}

	var dirVersion, dirNotes string
	registerDir := &cobra.Command{
		Use:   "register-dir DIR",
		Short: "Register every gale-agent-<os>-<arch>[.exe] in DIR (what make agents builds)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := openApp(cmd.Context())
			if err != nil {
				return err
			}
			defer a.Close()
			reg, err := app.Service[*agentdist.Service](a).RegisterDir(cmd.Context(), args[0], dirVersion, dirNotes)
			for _, name := range reg.Skipped {
				fmt.Fprintf(cmd.OutOrStdout(), "skipped %s: not gale-agent-<os>-<arch>[.exe] for a supported platform\n", name)
			}
			for _, b := range reg.Binaries {
				printRegistered(cmd, b.Binary, b.Created)
			}
			if errors.Is(err, agentdist.ErrNoBuilds) {
				return fmt.Errorf("%w; build them with make agents", err)
			}
			if err != nil {
				return cliError(err)
			}
			return nil
		},
	}
	registerDir.Flags().StringVar(&dirVersion, "version", "", "agent version of every binary, e.g. 1.2.3 (required)")
	registerDir.Flags().StringVar(&dirNotes, "notes", "", "release notes")
	_ = registerDir.MarkFlagRequired("version")

	promote := &cobra.Command{
		Use:   "promote VERSION",
		Short: "Make VERSION the one downloads and install.sh serve",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := openApp(cmd.Context())
			if err != nil {
				return err
			}
			defer a.Close()
			previous, err := app.Service[*agentdist.Service](a).Promote(cmd.Context(), args[0])
			if err != nil {
				return cliError(err)
			}
			v, _ := agentdist.NormalizeVersion(args[0])
			fmt.Fprintf(cmd.OutOrStdout(), "promoted gale-agent %s (previously promoted: %s)\n", v, orDefault(previous, "none"))
			return nil
		},
	}

	list := &cobra.Command{
		Use:   "list",
		Short: "List registered versions, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := openApp(cmd.Context())
			if err != nil {
				return err
			}
			defer a.Close()
			versions, err := app.Service[*agentdist.Service](a).List(cmd.Context())
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "VERSION\tPROMOTED\tPLATFORMS\tNOTES")
			for _, v := range versions {
				platforms := make([]string, len(v.Platforms))
				for i, p := range v.Platforms {
					platforms[i] = p.OS + "/" + p.Arch
				}
				promoted := ""
				if v.Promoted {
					promoted = "yes"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", v.Version, promoted, strings.Join(platforms, " "), firstLine(v.Notes))
			}
			return w.Flush()
		},
	}
	cmd.AddCommand(register, registerDir, promote, list)
	return cmd
}

func printRegistered(cmd *cobra.Command, b agentdist.Binary, created bool) {
	what := "registered"
	if !created {
		what = "already registered, unchanged:"
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s gale-agent %s %s/%s (%d bytes, sha256 %s)\n", what, b.Version, b.OS, b.Arch, b.SizeBytes, b.SHA256)
}

// cliError spells out a validation error's field details, which the API sends separately.
func cliError(err error) error {
	ae, ok := apperr.As(err)
	if !ok || len(ae.Details) == 0 {
		return err
	}
	parts := make([]string, len(ae.Details))
	for i, d := range ae.Details {
		parts[i] = d.Field + ": " + d.Message
	}
	return errors.New(strings.Join(parts, "; "))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// registerAgentBuilds registers the agent builds shipped with the server (AGENT_BUILDS_DIR),
// so that a server installed from its package or image serves install.sh at once. The
// server runs on without them when they cannot be registered.
func registerAgentBuilds(ctx context.Context, a *app.App, publicURLSet bool) {
	dir := a.Config.AgentBuildsDir
	if dir == "" {
		return
	}
	if !publicURLSet {
		a.Logger.WarnContext(ctx, "PUBLIC_URL is not set: install.sh tells endpoints to download from and enroll against "+
			a.Config.PublicURL+", which only this machine reaches; set PUBLIC_URL (in /etc/gale/gale.env for a package "+
			"install) to the address endpoints reach this server at, e.g. https://gale.example.com, and restart")
	}
	if err := app.Service[*agentdist.Service](a).RegisterBuilds(ctx, dir); err != nil {
		a.Logger.ErrorContext(ctx, "the shipped agent builds are not registered", "dir", dir, "error", err)
	}
}
