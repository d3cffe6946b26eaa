package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/scan"
)

// runScan implements `depsd scan`: scan the scope into the store and print
// a summary. Exit 1 when GitLab cannot be reached or rejects the token.
func runScan(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("scan", "scan [flags]", stderr, true)
	if code, ok := c.parse(args); !ok {
		return code
	}
	cfg, err := c.load()
	if err != nil {
		return fail(stderr, "scan", err)
	}
	log := c.logger(stderr)
	gl, err := newScopedGitLab(cfg, log)
	if err != nil {
		return fail(stderr, "scan", err)
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return fail(stderr, "scan", err)
	}
	defer st.Close()
	res, err := scan.Run(ctx, gl, st, scan.Options{
		Scope: scope(cfg), Containerfiles: cfg.Containerfiles, Registry: cfg.Registry, Analysis: cfg.Analysis(),
		InstanceHost: instanceHost(cfg), Concurrency: cfg.GitLab.Concurrency, Logger: log.With("component", "scan"),
	})
	if err != nil {
		return fail(stderr, "scan", explainGitLabError(err, cfg.GitLab.URL))
	}
	fmt.Fprintf(stdout, "scanned %d projects in %s with %d requests (%d files read, %d unchanged)\n",
		res.Projects, res.Duration.Round(1e6), res.Requests, res.FilesFetched, res.Unchanged)
	fmt.Fprintf(stdout, "%d dependencies between projects, %d external images, %d warnings, %d cycles\n",
		res.Edges, res.External, res.Warnings, res.Cycles)
	for _, cyc := range res.CyclePaths {
		fmt.Fprintf(stdout, "cycle (never followed): %s\n", strings.Join(cyc, " → "))
	}
	if res.Warnings > 0 {
		fmt.Fprintln(stdout, "see the warnings with: depsd graph")
	}
	return exitOK
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
