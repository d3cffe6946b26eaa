package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/scan"
)

// newScanCmd: scan the scope into the store and print a summary. Exit 1
// when GitLab cannot be reached or rejects the token.
func newScanCmd(a *app) *cobra.Command {
	var s settings
	cmd := &cobra.Command{
		Use:   "scan [--group G]... [--project P]... [--exclude GLOB]...",
		Short: "Scan the GitLab scope into the state file",
		Long: `scan lists the projects of the scope (groups with all their subgroups, and
single projects), reads the Containerfile and .gitlab-deps of each default
branch, and stores the dependency graph in the state file. A scan after the
first is incremental: it reads again only the projects whose head moved.

The scope comes from --group/--project or scope in depsd.yaml; GitLab from
--gitlab-url or GITLAB_URL, with the token in GITLAB_TOKEN or
GITLAB_TOKEN_FILE.`,
		Example: `  depsd scan --group infra/images --group apps --exclude 'apps/legacy/**'
  GITLAB_URL=https://gitlab.example.com GITLAB_TOKEN_FILE=~/.gitlab-token depsd scan --project infra/base`,
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
			st, err := openStore(ctx, cfg)
			if err != nil {
				return err
			}
			defer st.Close()
			opts := cfg.ScanOptions(log.With("component", "scan"), nil)
			pr := newProgress("scan", a.stderr, log, gl.Requests, nil)
			opts.Progress = pr.update
			res, err := scan.Run(ctx, gl, st, opts)
			pr.finish()
			if err != nil {
				return explainGitLabError(err, cfg.GitLab.URL)
			}
			out := a.stdout
			fmt.Fprintf(out, "scanned %d projects in %s with %d requests (%d files read, %d unchanged)\n",
				res.Projects, res.Duration.Round(1e6), res.Requests, res.FilesFetched, res.Unchanged)
			fmt.Fprintf(out, "%d dependencies between projects, %d external images, %d warnings, %d cycles\n",
				res.Edges, res.External, res.Warnings, res.Cycles)
			for _, cyc := range res.CyclePaths {
				fmt.Fprintf(out, "cycle (never followed): %s\n", strings.Join(cyc, " → "))
			}
			if res.Warnings > 0 {
				fmt.Fprintln(out, "see the warnings with: depsd graph")
			}
			return nil
		},
	}
	s.addCommon(cmd.Flags(), "info")
	s.addGitLab(cmd.Flags())
	return cmd
}

// explainGitLabError says in words which of the usual failures happened.
func explainGitLabError(err error, url string) error {
	switch {
	case errors.Is(err, gitlab.ErrUnauthorized):
		return fmt.Errorf("GitLab at %s rejected the token (check GITLAB_TOKEN; it needs the api scope): %w", url, err)
	case errors.Is(err, gitlab.ErrForbidden):
		return fmt.Errorf("the token may not do this at %s (it needs the api scope and at least Developer role): %w", url, err)
	case errors.Is(err, gitlab.ErrNotFound):
		return fmt.Errorf("not found on %s (is every group and project of the scope spelled right?): %w", url, err)
	case gitlab.IsRetryable(err):
		return fmt.Errorf("GitLab at %s could not be reached or kept failing: %w", url, err)
	}
	return err
}
