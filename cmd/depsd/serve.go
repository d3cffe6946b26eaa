package main

import (
	"time"

	"github.com/spf13/cobra"

	"gitlab.com/depsd/depsd/daemon"
)

// newServeCmd: the webhook receiver, chain engine and HTTP API until
// SIGTERM.
func newServeCmd(a *app) *cobra.Command {
	var (
		s         settings
		listen    string
		uiListen  string
		reconcile time.Duration
		expiry    time.Duration
		catchUp   time.Duration
		lease     time.Duration
		replica   string
	)
	cmd := &cobra.Command{
		Use:   "serve [--listen ADDR] [--ui-listen ADDR] [--mode full|first-level]",
		Short: "Receive webhooks and rebuild downstream projects in order",
		Long: `serve runs depsd: it scans the scope at start, receives GitLab's pipeline
and push webhooks at POST /hooks/gitlab, and when a project's pipeline
succeeds it triggers the projects downstream, wave after wave, each exactly
once. It runs the schedules and watches external images, and answers
/healthz, /readyz, /metrics, /api/v1/... and the dashboard (/) on the same
address, or, with --ui-listen, the dashboard, API and metrics on that
address only, so that GitLab need reach only the webhook. On SIGTERM
it finishes the requests in flight and stops; work recorded but not done
is picked up at the next start.

serve refuses to start without a webhook secret (DEPSD_WEBHOOK_SECRET,
DEPSD_WEBHOOK_SECRET_FILE, --webhook-secret-file or hooks.secret_file).`,
		Example: `  depsd serve --listen 127.0.0.1:8080
  depsd serve --listen 0.0.0.0:8080 --ui-listen 127.0.0.1:8081
  depsd serve --config /etc/depsd/depsd.yaml --mode first-level`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			for _, d := range []struct {
				flag string
				v    time.Duration
				min  time.Duration
			}{{"leader-lease", lease, time.Second}, {"reconcile-interval", reconcile, 100 * time.Millisecond},
				{"chain-expiry", expiry, time.Minute}, {"catch-up-interval", catchUp, 100 * time.Millisecond}} {
				if d.v < d.min {
					return usagef("--%s %s: want at least %s", d.flag, d.v, d.min)
				}
			}
			cfg, err := s.load(a)
			if err != nil {
				return err
			}
			if err := cfg.RequireServe(); err != nil {
				return err
			}
			log := s.logger(a.stderr)
			gl, err := newScopedGitLab(cfg, log)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("catch-up-interval") {
				cfg.CatchUpInterval = catchUp
			}
			d, err := daemon.New(ctx, daemon.Options{
				Config: cfg, GitLab: gl, Listen: listen, UIListen: uiListen, ReconcileInterval: reconcile, ChainExpiry: expiry, Logger: log,
				CatchUpInterval: cfg.CatchUpInterval, LeaderLease: lease, ReplicaID: replica,
			})
			if err != nil {
				return err
			}
			return d.Run(ctx)
		},
	}
	fs := cmd.Flags()
	s.addCommon(fs, "info")
	s.addGitLab(fs)
	s.addMode(fs)
	fs.StringVar(&listen, "listen", "127.0.0.1:8080", "HTTP address: POST /hooks/gitlab, /healthz, /readyz, and (without --ui-listen) the dashboard, /metrics, /api/v1/...")
	fs.StringVar(&uiListen, "ui-listen", "", "separate HTTP address for the dashboard, /metrics and /api/v1/... (keeps them off the address GitLab reaches)")
	fs.StringVar(&s.secretFile, "webhook-secret-file", "", "file holding the X-Gitlab-Token secret (default $DEPSD_WEBHOOK_SECRET_FILE, hooks.secret_file, or $DEPSD_WEBHOOK_SECRET)")
	fs.DurationVar(&reconcile, "reconcile-interval", time.Minute, "how often the status of pipelines depsd created is polled, in case a webhook never arrives")
	fs.DurationVar(&expiry, "chain-expiry", 7*24*time.Hour, "a chain still unfinished after this long expires")
	fs.DurationVar(&catchUp, "catch-up-interval", 5*time.Minute, "how often the leader reads upstream projects' pipelines for successes whose webhook never arrived (default catch_up_interval, 5m)")
	fs.DurationVar(&lease, "leader-lease", 15*time.Second, "how long the leader's lease and each process's liveness lease last without renewal; a dead leader is replaced within two, a dead process's pipeline creations are taken over after one")
	fs.StringVar(&replica, "replica-id", "", "this replica's name among those sharing the state, one per running process (default: host name and listen port)")
	return cmd
}
