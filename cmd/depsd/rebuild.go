package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/store"
)

// newRebuildCmd: start a chain at PROJECT. The chain lives in the state
// file, so a running daemon advances it; the first pipeline is created
// right away when GitLab is configured.
func newRebuildCmd(a *app) *cobra.Command {
	var (
		s      settings
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "rebuild [--dry-run] PROJECT",
		Short: "Start a chain at PROJECT (works with or without a daemon)",
		Long: `rebuild starts a chain at PROJECT, as a push to it would: PROJECT's pipeline
first, then everything downstream in waves. The chain is recorded in the
state file, so a running depsd serve advances it; when GitLab is configured
here, rebuild also creates PROJECT's pipeline right away. --dry-run prints
the waves and changes nothing; with GitLab configured it also estimates the
rebuild from each member's last successful default-branch pipelines: the
wall time along the critical path, the pipeline time in total, and the
members with no history.`,
		Example: `  depsd rebuild --dry-run infra/images/base
  depsd rebuild infra/images/base`,
		Args: exactArgs(1, "one PROJECT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			project := args[0]
			cfg, err := s.load(a)
			if err != nil {
				return err
			}
			st, g, err := openProjectGraph(ctx, cfg, project)
			if err != nil {
				return err
			}
			defer st.Close()
			out := a.stdout
			if dryRun {
				return dryRunRebuild(ctx, a, &s, cfg, st, g, project)
			}
			log := s.logger(a.stderr)
			ecfg := chain.Config{Store: st, Graph: st.Graph, Logger: log, Mode: cfg.ChainMode(), Refs: cfg.RefRules(),
				Pins: cfg.PinRules(), PinTimeout: cfg.Pins.Timeout, DepsOptions: cfg.Analysis()}
			gl, glErr := cfg.GitLabClient(log)
			if glErr == nil {
				// A rebuild merged into a chain started by a pipeline
				// changes what that chain's commit status should show;
				// `depsd serve` sends it.
				ecfg.GitLab, ecfg.Statuses = gl, cfg.ChainStatuses(gl)
			}
			engine, err := chain.New(ecfg)
			if err != nil {
				return err
			}
			id, err := engine.Rebuild(ctx, project, chain.Reason{Kind: chain.ReasonRebuild, Detail: "depsd rebuild"})
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "chain %d started at %s\n", id, project)
			if glErr != nil {
				fmt.Fprintf(out, "GitLab is not configured here (%v): a running depsd serve on %s creates the pipelines\n", glErr, store.Redact(cfg.State))
				return nil
			}
			if _, err := engine.SendPending(ctx); err != nil {
				return err
			}
			view, err := engine.Chain(ctx, id)
			if err != nil {
				return err
			}
			for _, m := range view.Members {
				if m.PipelineID != 0 {
					fmt.Fprintf(out, "%s: pipeline %d %s\n", m.Project, m.PipelineID, m.PipelineURL)
				} else if m.State == chain.Failed {
					fmt.Fprintf(out, "%s: failed: %s\n", m.Project, m.Why)
				}
			}
			fmt.Fprintln(out, "depsd serve triggers the rest as their upstreams succeed; follow it with: depsd chains", id)
			return nil
		},
	}
	fs := cmd.Flags()
	s.addCommon(fs, "info")
	s.addGitLab(fs)
	s.addMode(fs)
	fs.BoolVar(&dryRun, "dry-run", false, "print the waves that would be built and their estimated time, change nothing")
	return cmd
}
