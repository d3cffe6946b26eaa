package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/report"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/store"
)

// dryRunRebuild prints what `depsd rebuild PROJECT` would build, wave by
// wave, and what it would cost, estimated from each member's recent
// successful default-branch pipelines on GitLab. Without GitLab settings it
// prints the waves alone and says why there is no estimate.
func dryRunRebuild(ctx context.Context, a *app, s *settings, cfg config.Config, st *store.Store, g *deps.Graph, project string) error {
	projects, err := st.Projects(ctx)
	if err != nil {
		return err
	}
	defer writeBuildRefs(a.stdout, chain.RebuildPlan(g, project), projects, cfg.RefRules())
	gl, glErr := cfg.GitLabClient(s.logger(a.stderr))
	if glErr != nil {
		for i, wave := range chain.RebuildPlan(g, project) {
			fmt.Fprintf(a.stdout, "wave %d: %s\n", i, strings.Join(wave, " "))
		}
		fmt.Fprintf(a.stdout, "no estimate: GitLab is not configured here (%v)\n", glErr)
		return nil
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

// writeBuildRefs says, for each member that is not a project's default
// branch, which ref its pipeline will run on: its branch, or for a
// project's releases its newest release tag or its default branch
// (refs[].rebuild).
func writeBuildRefs(w io.Writer, waves [][]string, projects []scan.Project, rules deps.RefRules) {
	byPath := make(map[string]scan.Project, len(projects))
	for _, p := range projects {
		byPath[p.Path] = p
	}
	first := true
	for _, wave := range waves {
		for _, node := range wave {
			path, kind, branch := deps.ParseNode(node)
			if kind == deps.NodeDefault {
				continue
			}
			if first {
				fmt.Fprintln(w, "built on:")
				first = false
			}
			switch kind {
			case deps.NodeBranch:
				fmt.Fprintf(w, "  %s: a pipeline on branch %s\n", node, branch)
			case deps.NodeTags:
				p := byPath[path]
				tag := ""
				for _, r := range p.Refs {
					if r.Node == node {
						tag = r.Ref
					}
				}
				if rule, _ := rules.For(path); rule.Rebuild == deps.RebuildBranch {
					fmt.Fprintf(w, "  %s: a pipeline on its default branch %s (rebuild: branch)\n", node, p.DefaultBranch)
				} else {
					fmt.Fprintf(w, "  %s: a new pipeline on its newest release tag %s (rebuild: latest-tag)\n", node, tag)
				}
			}
		}
	}
}
