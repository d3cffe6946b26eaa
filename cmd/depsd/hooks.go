package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/daemon"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/webhook"
)

func newHooksCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hooks sync",
		Short: "Manage the webhooks depsd needs on GitLab",
		Long:  "hooks manages the project webhooks through which GitLab tells depsd about pipelines and pushes.",
		Example: `  depsd hooks sync --url https://depsd.example.com/hooks/gitlab --dry-run
  depsd hooks sync --url https://depsd.example.com/hooks/gitlab`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown subcommand %q: want sync", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return usagef("want a subcommand: sync")
		},
	}
	cmd.AddCommand(newHooksSyncCmd(a))
	return cmd
}

func newHooksSyncCmd(a *app) *cobra.Command {
	var (
		s       settings
		hookURL string
		dryRun  bool
		rotate  bool
	)
	cmd := &cobra.Command{
		Use:   "sync [--url PUBLIC_URL] [--dry-run] [--rotate-token]",
		Short: "Give every project in scope exactly one depsd webhook",
		Long: `sync lists the projects of the scope and makes sure each has exactly one
webhook pointing at depsd's endpoint, with pipeline and push events, SSL
verification and a secret: it creates missing hooks, fixes drifted ones and
removes duplicates. Running it again changes nothing.

With hooks.secret_mode: per-project (the default) each project hook gets a
secret of its own, derived from the webhook secret, which authenticates that
project's events only (a group hook: its group's). The state records once a
sync has given every hook its secret; until then every existing hook is
edited, and depsd serve still accepts the webhook secret itself, which hooks
installed before carry.

With hooks.signing auto or required (the default is auto), each hook also
gets the signing token GitLab 19.0 signs deliveries with: the configured one
(hooks.signing_token_file, DEPSD_WEBHOOK_SIGNING_TOKEN), else one generated
once and kept in depsd's state. A GitLab that ignores it is reported, not an
error.

With hooks.mode: group (GitLab Premium, Owner role), each group of the scope
gets one group hook instead, and depsd's project hooks below it are removed
once it answers a test delivery; where GitLab refuses (403/404) the projects
keep project hooks and the report says what to do. See docs/webhooks.md.

GitLab never shows a hook's secret or signing token, so a changed one cannot
be seen on GitLab: a changed webhook secret (or secret mode) is noticed from
the state, a changed signing token is not: after changing it, run sync with
--rotate-token.`,
		Example: `  depsd hooks sync --url https://depsd.example.com/hooks/gitlab --dry-run
  DEPSD_WEBHOOK_SECRET_FILE=/etc/depsd/secret depsd hooks sync --group infra --url https://depsd.example.com/hooks/gitlab`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cfg, err := s.load(a)
			if err != nil {
				return err
			}
			if hookURL != "" {
				cfg.Hooks.URL = hookURL
				if err := cfg.Validate(); err != nil {
					return err
				}
			}
			switch {
			case cfg.Hooks.URL == "":
				return errors.New("no hook URL: pass --url or set hooks.url / DEPSD_HOOK_URL")
			case cfg.Hooks.Secret == "":
				return errors.New("no webhook secret: set DEPSD_WEBHOOK_SECRET, DEPSD_WEBHOOK_SECRET_FILE or hooks.secret_file")
			}
			log := s.logger(a.stderr)
			gl, err := newScopedGitLab(cfg, log)
			if err != nil {
				return err
			}
			projects, err := gl.ListProjects(ctx, cfg.GitLabScope())
			if err != nil {
				return explainGitLabError(err, cfg.GitLab.URL)
			}
			st, err := openStore(ctx, cfg)
			if err != nil {
				return err
			}
			defer st.Close()
			signing, err := signingToken(ctx, cfg, st)
			if err != nil {
				return err
			}
			pr := newProgress("hooks sync", a.stderr, log, gl.Requests, nil)
			spec := gitlab.HookSpec{URL: cfg.Hooks.URL, SigningToken: signing, Groups: cfg.HookGroups(), RotateToken: rotate, Progress: pr.update}
			if err := daemon.HookSecrets(ctx, cfg, st, &spec); err != nil {
				return err
			}
			rep, err := gl.SyncHooks(ctx, projects, spec, dryRun)
			pr.finish()
			printHookReport(a.stdout, rep)
			if err != nil {
				return explainGitLabError(err, cfg.GitLab.URL)
			}
			if !dryRun && (spec.SecretsPending || rotate) {
				// Every hook now carries its secret: depsd serve stops
				// accepting the shared one (per-project mode).
				return daemon.HookSecretsSynced(ctx, cfg, st, time.Now())
			}
			return nil
		},
	}
	fs := cmd.Flags()
	s.addCommon(fs, "info")
	s.addGitLab(fs)
	fs.StringVar(&hookURL, "url", "", "public URL of depsd's webhook endpoint, e.g. https://depsd.example.com/hooks/gitlab (default hooks.url, $DEPSD_HOOK_URL)")
	fs.BoolVar(&dryRun, "dry-run", false, "say what would change, change nothing")
	fs.BoolVar(&rotate, "rotate-token", false, "set the secret and signing tokens on every hook (after changing either: GitLab never shows a hook's tokens, so drift cannot be seen)")
	return cmd
}

// signingToken is the signing token hooks sync installs: "" with
// hooks.signing: off, else the configured one or the one kept in the
// state (generated there the first time), as serve uses.
func signingToken(ctx context.Context, cfg config.Config, st *store.Store) (string, error) {
	if cfg.Hooks.Signing == webhook.SigningOff {
		return "", nil
	}
	if t := cfg.Hooks.SigningTokens(); len(t) > 0 {
		return t[0], nil
	}
	t, err := daemon.SigningTokens(ctx, cfg, st)
	if err != nil || len(t) == 0 {
		return "", err
	}
	return t[0], nil
}

// printHookReport writes what changed, or in a dry run the plan: one line
// per hook that is or would be changed, then a summary.
func printHookReport(w io.Writer, rep gitlab.HookReport) {
	verb := ""
	if rep.DryRun {
		verb = "would be "
		fmt.Fprintln(w, "dry run: nothing is changed; the plan:")
	}
	for _, ch := range rep.Changes {
		if ch.Action == gitlab.HookUnchanged || ch.Action == gitlab.HookCoveredByGroup {
			continue
		}
		name := ch.Project
		if ch.Group {
			name = "group " + name
		}
		fmt.Fprintf(w, "%s: %s%s", name, verb, ch.Action)
		if len(ch.Reasons) > 0 {
			fmt.Fprintf(w, " (%s)", strings.Join(ch.Reasons, "; "))
		}
		fmt.Fprintln(w)
	}
	if rep.Changed() == 0 {
		fmt.Fprintf(w, "all %d projects have their depsd hook: nothing to change\n", len(rep.Changes))
	} else {
		fmt.Fprintf(w, "%d projects, %d unchanged\n", len(rep.Changes), rep.Count(gitlab.HookUnchanged))
	}
	if note := rep.UnsignedNote(); note != "" {
		fmt.Fprintln(w, "note: "+note)
	}
}
