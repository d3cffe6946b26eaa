package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/report"
	"gitlab.com/depsd/depsd/store"
)

// dryRunRebuild prints what `depsd rebuild PROJECT` would build, wave by
// wave, and what it would cost, estimated from each member's recent
// successful default-branch pipelines on GitLab. Without GitLab settings it
// prints the waves alone and says why there is no estimate.
func dryRunRebuild(ctx context.Context, a *app, s *settings, cfg config.Config, st *store.Store, g *deps.Graph, project string) error {
	gl, glErr := cfg.GitLabClient(s.logger(a.stderr))
	if glErr != nil {
		for i, wave := range chain.RebuildPlan(g, project) {
			fmt.Fprintf(a.stdout, "wave %d: %s\n", i, strings.Join(wave, " "))
		}
		fmt.Fprintf(a.stdout, "no estimate: GitLab is not configured here (%v)\n", glErr)
		return nil
	}
	projects, err := st.Projects(ctx)
	if err != nil {
		return err
	}
	targets := report.RebuildTargets(g, project, projects)
	typical, failed := report.FetchDurations(ctx, gl, targets, max(cfg.GitLab.Concurrency, 4))
	if err := ctx.Err(); err != nil {
		return err
	}
	failedPaths := make([]string, 0, len(failed))
	for p := range failed {
		failedPaths = append(failedPaths, p)
	}
	sort.Strings(failedPaths)
	for _, p := range failedPaths {
		fmt.Fprintf(a.stderr, "depsd rebuild: pipeline history of %s could not be read (counted as no history): %v\n", p, failed[p])
	}
	return report.WriteEstimate(a.stdout, report.EstimateRebuild(g, project, typical))
}
