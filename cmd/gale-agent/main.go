// Command gale-agent is the Gale endpoint agent: it enrolls a machine with a Gale server,
// then runs as a system service that keeps a live channel to the server, reports health and
// inventory, and carries out what technicians ask.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/kardianos/service"
	"github.com/spf13/cobra"

	"gale/internal/agent"
)

// version is set at build time: -ldflags "-X main.version=1.2.3".
var version = "0.0.0-dev"

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "gale-agent:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	var configPath string
	root := &cobra.Command{Use: "gale-agent", Short: "The Gale endpoint agent", SilenceUsage: true, SilenceErrors: true}
	root.PersistentFlags().StringVar(&configPath, "config", agent.DefaultConfigPath(), "path of the agent's configuration file")
	root.AddCommand(elevateCmd())
	root.AddCommand(enrollCmd(&configPath), runCmd(&configPath), serviceCmd(&configPath), &cobra.Command{
		Use: "version", Short: "Print the agent version", Args: cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), version) },
	})
	return root
}

func logger() *slog.Logger { return slog.New(slog.NewTextHandler(os.Stderr, nil)) }

func enrollCmd(configPath *string) *cobra.Command {
	var o agent.EnrollOptions
	var quiet bool
	cmd := &cobra.Command{
		Use:   "enroll <enrollment key> --server <base address> --enrollment-secret <secret>",
		Short: "Enroll this machine with a Gale server",
		Long: "Enroll registers this machine and writes the configuration file. If a valid configuration exists the machine is " +
			"enrolled: enroll does nothing and exits 0, so install scripts can run it again safely. A configuration that cannot " +
			"be read, or of a decommissioned device, is replaced; --force replaces a valid one too.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Key, o.ConfigPath, o.Version = args[0], *configPath, version
			if o.Server == "" {
				return errors.New("--server is required (the Gale server's address, like https://rmm.example.com)")
			}
			o.Replaced = func(reason string) {
				fmt.Fprintf(cmd.ErrOrStderr(), "enrolling anew: %s\n", reason)
			}
			cfg, err := agent.Enroll(cmd.Context(), o)
			if errors.Is(err, agent.ErrAlreadyEnrolled) {
				if !quiet {
					fmt.Fprintf(cmd.OutOrStdout(), "already enrolled (%s exists); nothing to do\n", o.ConfigPath)
				}
				return nil
			}
			if err != nil {
				return err
			}
			if !quiet {
				fmt.Fprintf(cmd.OutOrStdout(), "enrolled as device %s; configuration written to %s\nnext: gale-agent service install\n",
					cfg.DeviceID, o.ConfigPath)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Server, "server", "", "base address of the Gale server")
	cmd.Flags().StringVar(&o.Secret, "enrollment-secret", "", "the enrollment secret (the key's own, or the server's global one)")
	cmd.Flags().StringVar(&o.SiteID, "site-id", "", "site to join (ignored when the key is pinned to a site)")
	cmd.Flags().BoolVar(&quiet, "quiet", false, "print nothing on success")
	cmd.Flags().BoolVar(&o.Force, "force", false, "enroll anew even when a valid configuration exists")
	return cmd
}

func runCmd(configPath *string) *cobra.Command {
	var noWatchdog bool
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the agent in the foreground",
		Long: "Run starts the watchdog, which runs the main agent as a child process and restarts it when it exits or " +
			"hangs. --no-watchdog runs the main agent alone. Once the server decommissioned the device, run exits with status " +
			strconv.Itoa(agent.ExitDecommissioned) + ", which the system service counts as a success and does not restart.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !agent.Enrolled(*configPath) {
				return fmt.Errorf("not enrolled: %s does not exist; run gale-agent enroll first", *configPath)
			}
			if noWatchdog {
				ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
				err := agent.Run(ctx, runOptions(*configPath))
				stop()
				exitIfDecommissioned(err)
				return err
			}
			prg := &program{configPath: *configPath}
			s, err := service.New(prg, serviceConfig(*configPath))
			if err != nil {
				return err
			}
			prg.service = s
			return s.Run()
		},
	}
	cmd.Flags().BoolVar(&noWatchdog, "no-watchdog", false, "run the main agent without its watchdog")
	return cmd
}

// exitIfDecommissioned ends the process with ExitDecommissioned when the server
// decommissioned the device: nothing is left to do, and the service must not restart it.
func exitIfDecommissioned(err error) {
	if errors.Is(err, agent.ErrDecommissioned) {
		fmt.Fprintln(os.Stderr, "gale-agent:", err)
		os.Exit(agent.ExitDecommissioned)
	}
}

func runOptions(configPath string) agent.RunOptions {
	return agent.RunOptions{ConfigPath: configPath, Version: version, Logger: logger(), Capabilities: capabilities(configPath)}
}

// program adapts the watchdog to the service manager (systemd, launchd, Windows SCM), and
// runs it in the foreground when started from a terminal.
type program struct {
	configPath string
	service    service.Service
	cancel     context.CancelFunc
	done       chan struct{}
}

func (p *program) Start(service.Service) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan struct{})
	go func() {
		defer close(p.done)
		err := agent.Watchdog(ctx, agent.WatchdogOptions{ConfigPath: p.configPath, Executable: exe,
			Args: []string{"run", "--no-watchdog", "--config", p.configPath}, Logger: logger(), Unresponsive: unresponsiveAfter()})
		if !errors.Is(err, agent.ErrDecommissioned) {
			return
		}
		fmt.Fprintln(os.Stderr, "gale-agent:", err)
		code, stopService := retiredExit(runtime.GOOS, service.Interactive())
		if stopService && p.service != nil {
			// Stopped through the service manager, the service ends as stopped on purpose,
			// which its recovery actions leave alone. Stop waits for this goroutine to end.
			go func() {
				if err := p.service.Stop(); err != nil {
					fmt.Fprintln(os.Stderr, "gale-agent: could not stop the service:", err)
					os.Exit(code)
				}
			}()
			return
		}
		os.Exit(code)
	}()
	return nil
}

// retiredExit is how the watchdog of a decommissioned device ends, so the service manager of
// the system goos leaves it stopped: systemd counts ExitDecommissioned as a success
// (SuccessExitStatus); launchd tells exits by success alone (KeepAlive SuccessfulExit=false),
// so there it exits 0; Windows restarts a service whose process ends by itself (its recovery
// actions), so there the service stops itself. Run from a terminal (interactive), it exits
// ExitDecommissioned everywhere.
func retiredExit(goos string, interactive bool) (code int, stopService bool) {
	switch {
	case interactive:
		return agent.ExitDecommissioned, false
	case goos == "darwin":
		return 0, false
	case goos == "windows":
		return 0, true
	}
	return agent.ExitDecommissioned, false
}

func (p *program) Stop(service.Service) error {
	p.cancel()
	<-p.done
	return nil
}

// unresponsiveAfter reads GALE_AGENT_UNRESPONSIVE_SECONDS: how long the main agent may stay
// silent before the watchdog restarts it (default 45 s).
func unresponsiveAfter() time.Duration {
	n, err := strconv.Atoi(os.Getenv("GALE_AGENT_UNRESPONSIVE_SECONDS"))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

func serviceConfig(configPath string) *service.Config {
	abs, err := filepath.Abs(configPath)
	if err != nil {
		abs = configPath
	}
	return &service.Config{Name: "gale-agent", DisplayName: "Gale Agent",
		Description: "Gale remote monitoring and management agent", Arguments: []string{"run", "--config", abs},
		// Restarted on failure only, so a decommissioned agent stays stopped (see retiredExit):
		// systemd counts ExitDecommissioned as a success; launchd restarts an exit that is not
		// 0; Windows restarts the service 5 s after its process dies, every time (the failure
		// count resets after a day).
		Option: service.KeyValue{"Restart": "on-failure", "SuccessExitStatus": strconv.Itoa(agent.ExitDecommissioned),
			"LaunchdConfig": launchdPlist, "OnFailure": "restart", "OnFailureDelayDuration": "5s", "OnFailureResetPeriod": 86400}}
}

// launchdPlist is the service's launchd job: the library's, but with KeepAlive restarting
// the job only when it exits unsuccessfully (and starting it at load).
const launchdPlist = `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>Disabled</key>
	<false/>
	{{if EnvVars}}<key>EnvironmentVariables</key>
	<dict>
{{range EnvVars}}{{.}}
{{end}}	</dict>
	{{end}}<key>KeepAlive</key>
	<dict>
		<key>SuccessfulExit</key>
		<false/>
	</dict>
	<key>Label</key>
	<string>{{Name | html}}</string>
	<key>ProgramArguments</key>
	<array>
		<string>{{Path | html}}</string>
{{range Arguments}}		<string>{{. | html}}</string>
{{end}}	</array>
	<key>RunAtLoad</key>
	<true/>
	{{if StandardErrorPath}}<key>StandardErrorPath</key>
	<string>{{StandardErrorPath | html}}</string>
	{{end}}{{if StandardOutPath}}<key>StandardOutPath</key>
	<string>{{StandardOutPath | html}}</string>
	{{end}}</dict>
</plist>
`

func serviceCmd(configPath *string) *cobra.Command {
	cmd := &cobra.Command{Use: "service", Short: "Manage the agent's system service"}
	for _, action := range []struct{ name, short string }{
		{"install", "Install the system service (systemd, launchd or Windows service)"},
		{"uninstall", "Remove the system service"},
		{"start", "Start the system service"},
		{"stop", "Stop the system service"},
	} {
		cmd.AddCommand(&cobra.Command{Use: action.name, Short: action.short, Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if action.name == "install" && !agent.Enrolled(*configPath) {
					return fmt.Errorf("not enrolled: %s does not exist; run gale-agent enroll first", *configPath)
				}
				s, err := service.New(&program{configPath: *configPath}, serviceConfig(*configPath))
				if err != nil {
					return err
				}
				if err := service.Control(s, action.name); err != nil {
					return fmt.Errorf("service %s: %w (this usually needs root or Administrator)", action.name, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "service %s: done\n", action.name)
				return nil
			}})
	}
	return cmd
}
