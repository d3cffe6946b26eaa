package report

import (
	"fmt"
	"slices"
	"sort"
)

// Around returns the part of doc a person looks at when they focus on one
// project: the project, its upstreams (what it is built from) and all its
// downstreams (what a rebuild of it touches), like bashbrew's parents and
// children. Depth, when positive, bounds how many edges away in each
// direction a project may be; 0 means no bound. Edges, external images,
// warnings and cycles are kept where both ends are in the selection. The
// CLI (`depsd graph --around`) and the dashboard's focus view both call it,
// so they show the same subgraph.
func Around(doc Graph, project string, depth int) (Graph, error) {
	if depth < 0 {
		return Graph{}, fmt.Errorf("depth %d: want 0 (no bound) or more", depth)
	}
	byPath := make(map[string]*Project, len(doc.Projects))
	for i := range doc.Projects {
		byPath[doc.Projects[i].Path] = &doc.Projects[i]
	}
	if byPath[project] == nil {
		return Graph{}, fmt.Errorf("project %s is not in the scanned graph", project)
	}
	keep := map[string]bool{project: true}
	walk := func(next func(*Project) []string) {
		frontier := []string{project}
		for level := 1; len(frontier) > 0 && (depth == 0 || level <= depth); level++ {
			var grown []string
			for _, p := range frontier {
				for _, q := range next(byPath[p]) {
					if !keep[q] && byPath[q] != nil {
						keep[q] = true
						grown = append(grown, q)
					}
				}
			}
			frontier = grown
		}
	}
	walk(func(p *Project) []string { return p.Upstream })
	walk(func(p *Project) []string { return p.Downstream })
	out := Subset(doc, keep)
	out.Focus = project
	return out, nil
}

// Subset returns the projects of doc in keep, their edges restricted to
// keep, and the cycles that lie entirely in keep.
func Subset(doc Graph, keep map[string]bool) Graph {
	out := Graph{Projects: make([]Project, 0, len(keep)), Cycles: [][]string{}}
	in := func(list []string) []string {
		kept := []string{}
		for _, p := range list {
			if keep[p] {
				kept = append(kept, p)
			}
		}
		return kept
	}
	for _, p := range doc.Projects {
		if !keep[p.Path] {
			continue
		}
		p.Upstream, p.Downstream = in(p.Upstream), in(p.Downstream)
		out.Projects = append(out.Projects, p)
	}
	sort.Slice(out.Projects, func(i, j int) bool { return out.Projects[i].Path < out.Projects[j].Path })
	for _, c := range doc.Cycles {
		if len(in(c)) == len(c) {
			out.Cycles = append(out.Cycles, slices.Clone(c))
		}
	}
	return out
}
