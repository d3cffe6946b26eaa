package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/report"
	"gitlab.com/depsd/depsd/store"
)

// runGraph implements `depsd graph`: print the stored graph.
func runGraph(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("graph", "graph [--format text|json|dot|mermaid|svg] [--around PROJECT [--depth N]]", stderr, false)
	format := c.fs.String("format", "text", "output format: "+strings.Join(report.Formats(), ", "))
	around := c.fs.String("around", "", "only PROJECT, its upstreams and all its downstreams (the dashboard's focus view)")
	depth := c.fs.Int("depth", 0, "with --around: at most N edges away from PROJECT (0: no bound)")
	if code, ok := c.parse(args); !ok {
		return code
	}
	if !slices.Contains(report.Formats(), *format) {
		fmt.Fprintf(stderr, "depsd graph: unknown format %q (want one of %s)\n", *format, strings.Join(report.Formats(), ", "))
		return exitUsage
	}
	st, code := openScanned(ctx, c, stderr, "graph")
	if st == nil {
		return code
	}
	defer st.Close()
	projects, err := st.Projects(ctx)
	if err != nil {
		return fail(stderr, "graph", err)
	}
	doc := report.Build(projects, store.GraphOf(projects))
	if *around != "" {
		if doc, err = report.Around(doc, *around, *depth); err != nil {
			return fail(stderr, "graph", err)
		}
	}
	if err := report.Write(stdout, *format, doc); err != nil {
		return fail(stderr, "graph", err)
	}
	return exitOK
}

// runDeps implements `depsd deps PROJECT` (direct upstreams) and
// `depsd rdeps [--all] PROJECT` (direct, or all transitive, downstreams in
// wave order).
func runDeps(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	usage := name + " PROJECT"
	if name == "rdeps" {
		usage = "rdeps [--all] PROJECT"
	}
	c := newCommand(name, usage, stderr, false)
	all := false
	if name == "rdeps" {
		c.fs.BoolVar(&all, "all", false, "all transitive downstreams, in the order a rebuild builds them (one wave per line)")
	}
	if code, ok := c.parse(args); !ok {
		return code
	}
	if c.fs.NArg() != 1 {
		c.fs.Usage()
		return exitUsage
	}
	project := c.fs.Arg(0)
	st, g, code := openProjectGraph(ctx, c, stderr, name, project)
	if st == nil {
		return code
	}
	defer st.Close()
	switch {
	case name == "deps":
		printLines(stdout, g.Upstream(project))
	case !all:
		printLines(stdout, g.Downstream(project))
	default:
		waves := g.Waves(project)
		for i, w := range waves {
			if i == 0 {
				continue // the project itself
			}
			fmt.Fprintf(stdout, "wave %d: %s\n", i, strings.Join(w, " "))
		}
	}
	return exitOK
}

func printLines(w io.Writer, lines []string) {
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

// openProjectGraph opens the store of a command about one project and reads
// the graph, failing clearly when the project is not in it.
func openProjectGraph(ctx context.Context, c *commonFlags, stderr io.Writer, name, project string) (*store.Store, *deps.Graph, int) {
	st, code := openScanned(ctx, c, stderr, name)
	if st == nil {
		return nil, nil, code
	}
	g, err := st.Graph(ctx)
	if err == nil && !g.Has(project) {
		err = fmt.Errorf("project %s is not in the scanned graph", project)
	}
	if err != nil {
		st.Close()
		return nil, nil, fail(stderr, name, err)
	}
	return st, g, exitOK
}

// openScanned opens the store of a command that reads scan results, and
// says so plainly when nothing was scanned yet.
func openScanned(ctx context.Context, c *commonFlags, stderr io.Writer, name string) (*store.Store, int) {
	cfg, err := c.load()
	if err != nil {
		return nil, fail(stderr, name, err)
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return nil, fail(stderr, name, err)
	}
	if _, ok, err := st.LastScan(ctx); err != nil || !ok {
		st.Close()
		if err == nil {
			err = fmt.Errorf("%s holds no scan yet: run depsd scan first", cfg.State)
		}
		return nil, fail(stderr, name, err)
	}
	return st, exitOK
}
