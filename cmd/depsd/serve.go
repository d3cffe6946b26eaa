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
		reconcile time.Duration
		expiry    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve [--listen ADDR] [--mode chain|first-level]",
		Short: "Receive webhooks and rebuild downstream projects in order",
		Long: `serve runs depsd: it scans the scope at start, receives GitLab's pipeline
and push webhooks at POST /hooks/gitlab, and when a project's pipeline
succeeds it triggers the projects downstream, wave after wave, each exactly
once. It runs the schedules and watches external images, and answers
/healthz, /readyz, /metrics and /api/v1/... on the same address. On SIGTERM
it finishes the requests in flight and stops; work recorded but not done
is picked up at the next start.

serve refuses to start without a webhook secret (DEPSD_WEBHOOK_SECRET,
DEPSD_WEBHOOK_SECRET_FILE, --webhook-secret-file or hooks.secret_file).`,
		Example: `  depsd serve --listen 127.0.0.1:8080
  depsd serve --config /etc/depsd/depsd.yaml --mode first-level`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cfg, err := s.load(a)
			if err != nil {
				return err
			}
			log := s.logger(a.stderr)
			gl, err := newScopedGitLab(cfg, log)
			if err != nil {
				return err
			}
			d, err := daemon.New(ctx, daemon.Options{
				Config: cfg, GitLab: gl, Listen: listen, ReconcileInterval: reconcile, ChainExpiry: expiry, Logger: log,
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
	fs.StringVar(&listen, "listen", "127.0.0.1:8080", "HTTP address: POST /hooks/gitlab, /healthz, /readyz, /metrics, /api/v1/...")
	fs.StringVar(&s.secretFile, "webhook-secret-file", "", "file holding the X-Gitlab-Token secret (default $DEPSD_WEBHOOK_SECRET_FILE, hooks.secret_file, or $DEPSD_WEBHOOK_SECRET)")
	fs.DurationVar(&reconcile, "reconcile-interval", time.Minute, "how often the status of pipelines depsd created is polled, in case a webhook never arrives")
	fs.DurationVar(&expiry, "chain-expiry", 7*24*time.Hour, "a chain still unfinished after this long expires")
	return cmd
}
