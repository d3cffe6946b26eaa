package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/report"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/store"
)

func newGraphCmd(a *app) *cobra.Command {
	var (
		s      settings
		format string
		around string
		depth  int
	)
	cmd := &cobra.Command{
		Use:   "graph [--format text|json|dot|mermaid|svg] [--around PROJECT [--depth N]]",
		Short: "Print the scanned dependency graph",
		Long: `graph prints the dependency graph of the last depsd scan: each project with
its upstreams, downstreams and external images, the warnings of its files,
and the cycles (which depsd never follows). json is what GET /api/v1/graph
answers; dot and mermaid draw it, and svg is the picture of the dashboard
(columns in build order). --around keeps PROJECT, what it is built from and
everything built from it: the dashboard's focus view.`,
		Example: `  depsd graph
  depsd graph --format svg --around infra/images/ruby --depth 2 > ruby.svg
  depsd graph --format dot | dot -Tsvg > graph.svg
  depsd graph --format json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cfg, err := s.load(a)
			if err != nil {
				return err
			}
			st, err := openScanned(ctx, cfg)
			if err != nil {
				return err
			}
			defer st.Close()
			projects, err := st.Projects(ctx)
			if err != nil {
				return err
			}
			doc := report.Build(projects, scan.GraphOf(projects))
			if around != "" {
				if doc, err = report.Around(doc, around, depth); err != nil {
					return err
				}
			}
			return report.Write(a.stdout, format, doc)
		},
	}
	s.addCommon(cmd.Flags(), "info")
	enumVar(cmd.Flags(), &format, "format", "text", report.Formats(), "output format: "+strings.Join(report.Formats(), ", "))
	cmd.Flags().StringVar(&around, "around", "", "only PROJECT, its upstreams and all its downstreams (the dashboard's focus view)")
	cmd.Flags().IntVar(&depth, "depth", 0, "with --around: at most N edges away from PROJECT (0: no bound)")
	return cmd
}

func newDepsCmd(a *app) *cobra.Command {
	var s settings
	cmd := &cobra.Command{
		Use:   "deps PROJECT",
		Short: "Print the direct upstreams of a project",
		Long: `deps prints the projects whose images PROJECT builds on, or names in its
.gitlab-deps, one per line, from the last depsd scan.`,
		Example: "  depsd deps apps/shop",
		Args:    exactArgs(1, "one PROJECT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := s.load(a)
			if err != nil {
				return err
			}
			st, g, err := openProjectGraph(cmd.Context(), cfg, args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			printLines(a.stdout, g.Upstream(args[0]))
			return nil
		},
	}
	s.addCommon(cmd.Flags(), "info")
	return cmd
}

func newRdepsCmd(a *app) *cobra.Command {
	var (
		s   settings
		all bool
	)
	cmd := &cobra.Command{
		Use:   "rdeps [--all] PROJECT",
		Short: "Print the downstreams of a project",
		Long: `rdeps prints the projects that build on PROJECT directly, one per line,
from the last depsd scan. With --all it prints every transitive downstream
in the order a rebuild of PROJECT builds them: one wave per line, each wave
after the one before has succeeded.`,
		Example: `  depsd rdeps infra/images/base
  depsd rdeps infra/images/base --all`,
		Args: exactArgs(1, "one PROJECT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			project := args[0]
			cfg, err := s.load(a)
			if err != nil {
				return err
			}
			st, g, err := openProjectGraph(cmd.Context(), cfg, project)
			if err != nil {
				return err
			}
			defer st.Close()
			// Named as depsd graph names them: project@branch for the
			// default branch of a project with several nodes.
			projects, err := st.Projects(cmd.Context())
			if err != nil {
				return err
			}
			labels := report.Labels(projects)
			name := func(keys []string) []string {
				out := make([]string, len(keys))
				for i, k := range keys {
					out[i] = cmp.Or(labels[k], k)
				}
				return out
			}
			if !all {
				printLines(a.stdout, name(g.Downstream(project)))
				return nil
			}
			for i, w := range g.Waves(project) {
				if i == 0 {
					continue // the project itself
				}
				fmt.Fprintf(a.stdout, "wave %d: %s\n", i, strings.Join(name(w), " "))
			}
			return nil
		},
	}
	s.addCommon(cmd.Flags(), "info")
	cmd.Flags().BoolVar(&all, "all", false, "all transitive downstreams, in the order a rebuild builds them (one wave per line)")
	return cmd
}

func printLines(w io.Writer, lines []string) {
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

// openProjectGraph opens the store of a command about one project and reads
// the graph, failing clearly when the project is not in it.
func openProjectGraph(ctx context.Context, cfg config.Config, project string) (*store.Store, *deps.Graph, error) {
	st, err := openScanned(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	g, err := st.Graph(ctx)
	if err == nil && !g.Has(project) {
		err = fmt.Errorf("project %s is not in the scanned graph", project)
	}
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, g, nil
}

// openScanned opens the store of a command that reads scan results, and
// says so plainly when nothing was scanned yet.
func openScanned(ctx context.Context, cfg config.Config) (*store.Store, error) {
	st, err := openExisting(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, ok, err := st.LastScan(ctx); err != nil || !ok {
		st.Close()
		if err == nil {
			err = fmt.Errorf("%s holds no scan yet: run depsd scan first", store.Redact(cfg.State))
		}
		return nil, err
	}
	return st, nil
}
