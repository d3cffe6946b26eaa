package scan

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"gitlab.com/depsd/depsd/deps"
)

// AnalyzeOptions say how Analyze maps what files name to nodes.
type AnalyzeOptions struct {
	// Registry, when set, overrides each project's registry prefix with
	// Registry/<lower-case path>.
	Registry string
	// InstanceHost is the GitLab host that .gitlab-deps URLs must name.
	InstanceHost string
	// Analysis says how Containerfiles are read (the platforms).
	Analysis deps.Options
	// Refs are the rules of `refs:`: what each node publishes.
	Refs deps.RefRules
	// Seen are the publications depsd saw, by image.
	Seen map[string]deps.Seen
}

// Analyze parses the stored files of every node of every project (its
// default branch and its Refs), fills in their Dependencies, File, Built
// and Warnings (appending to warnings already there), maps images and
// .gitlab-deps entries to the projects in the list and to the node of each
// that publishes the reference (deps.NodeResolver), and returns the
// dependency graph of those nodes (GraphOf: the same rules as the graph
// later read back from the store).
func Analyze(projects []Project, o AnalyzeOptions) *deps.Graph {
	prefixes := make(map[string]string, len(projects))
	byLowerPath := make(map[string]string, len(projects))
	refs := make([]deps.ProjectRefs, 0, len(projects))
	for _, p := range projects {
		prefix := p.RegistryPrefix
		if o.Registry != "" {
			prefix = strings.TrimSuffix(o.Registry, "/") + "/" + strings.ToLower(p.Path)
		}
		if prefix != "" {
			prefixes[prefix] = p.Path
		}
		byLowerPath[strings.ToLower(p.Path)] = p.Path
		refs = append(refs, p.refsOf(prefix, o.Refs))
	}
	images := deps.NewRegistryMap(prefixes)
	resolver, errs := deps.NewNodeResolver(refs, o.Seen)
	problems := map[string][]string{} // project → refs: problems with its templates
	for _, err := range errs {
		var te *deps.TemplateError
		if errors.As(err, &te) {
			problems[te.Project] = append(problems[te.Project], err.Error())
		}
	}

	named := map[string]map[string]bool{} // project → references downstreams name
	for i := range projects {
		p := &projects[i]
		for _, msg := range problems[p.Path] {
			p.Warnings = append(p.Warnings, deps.Warning{Message: msg})
		}
		a := nodeAnalysis{images: images, byLowerPath: byLowerPath, resolver: resolver, o: o}
		p.Dependencies, p.File, p.Built, p.Warnings = a.files(p.Path, p.Path, p.Files, p.Warnings)
		for j := range p.Refs {
			r := &p.Refs[j]
			r.Dependencies, r.File, r.Built, r.Warnings = a.files(p.Path, r.Node, r.Files, r.Warnings)
		}
		for _, n := range p.Nodes() {
			q, _ := p.At(n)
			for _, d := range q.Dependencies {
				if d.Project != "" && d.Tag != "" {
					if named[d.Project] == nil {
						named[d.Project] = map[string]bool{}
					}
					named[d.Project][d.Repository+":"+d.Tag] = true
				}
			}
		}
	}
	for i := range projects {
		p := &projects[i]
		if len(p.Refs) == 0 {
			continue
		}
		for _, c := range resolver.Conflicts(p.Path, slices.Sorted(maps.Keys(named[p.Path]))) {
			p.Warnings = append(p.Warnings, deps.Warning{Message: "refs: " + c})
		}
	}
	return GraphOf(projects)
}

// refsOf is what the resolver needs of p: its rule, followed branches and
// newest release.
func (p Project) refsOf(prefix string, rules deps.RefRules) deps.ProjectRefs {
	rule, _ := rules.For(p.Path)
	pr := deps.ProjectRefs{Path: p.Path, RegistryPrefix: prefix, DefaultBranch: p.DefaultBranch, Rule: rule}
	for _, r := range p.Refs {
		switch r.Kind {
		case deps.NodeBranch:
			pr.Branches = append(pr.Branches, r.Ref)
		case deps.NodeTags:
			if rel, ok := deps.ParseRelease(r.Ref); ok {
				pr.Release = &rel
			}
		}
	}
	return pr
}

// nodeAnalysis maps one node's files to dependencies.
type nodeAnalysis struct {
	images      *deps.RegistryMap
	byLowerPath map[string]string
	resolver    *deps.NodeResolver
	o           AnalyzeOptions
}

// files analyses the files of node (of project) and returns its
// dependencies, the file analysed, its built stage's bases and warnings.
func (a nodeAnalysis) files(project, node string, files []File, warnings []deps.Warning) (ds []deps.Dependency, file string, built []string, _ []deps.Warning) {
	for _, f := range files {
		fa := analyzeFile(f, a.o.InstanceHost, a.o.Analysis)
		if f.Name != deps.GitLabDepsFile {
			file, built = f.Name, fa.Built
		}
		warnings = append(warnings, fa.Warnings...)
		for _, d := range fa.Dependencies {
			warn := func(format string, args ...any) {
				warnings = append(warnings, deps.Warning{File: f.Name, Line: d.Line, Message: fmt.Sprintf(format, args...)})
			}
			switch {
			case d.Kind == deps.KindGitLabDeps:
				// A line may name a node: infra/base@bookworm.
				path, kind, branch := deps.ParseNode(d.Project)
				if canonical, ok := a.byLowerPath[strings.ToLower(path)]; ok {
					d.Project = canonical
					if kind != deps.NodeDefault {
						d.Node, d.Via = deps.NodeKey(canonical, kind, branch), deps.EdgeConfigured
					}
				} else {
					warn("upstream %s is not in depsd's scope: its pipelines are not watched", d.Project)
				}
			case d.Repository != "":
				d.Project, _ = a.images.Project(d.Repository)
				if d.Project != "" {
					n, via, seenIn := a.resolver.NodeSeen(d.Project, d.Image)
					if n != d.Project {
						d.Node = n
					}
					d.Via, d.SeenIn = via, seenIn
				}
			}
			if d.UpstreamNode() == node {
				// A node building FROM its own image would trigger
				// itself forever: the graph leaves it out.
				warn("%s is this project's own image: not an upstream", d.Ref)
			}
			ds = append(ds, d)
		}
	}
	return ds, file, built, warnings
}

// analyzeFile parses one stored file, or finds it parsed (analyses). A
// file that cannot be built becomes a warning with its line: the project
// declares nothing until it is fixed (its own pipeline fails too).
func analyzeFile(f File, instanceHost string, opts deps.Options) deps.FileAnalysis {
	return analyses.get(f, instanceHost, opts, func() deps.FileAnalysis { return parseFile(f, instanceHost, opts) })
}

// parseFile is analyzeFile without the cache.
func parseFile(f File, instanceHost string, opts deps.Options) deps.FileAnalysis {
	if f.Name == deps.GitLabDepsFile {
		return deps.ParseGitLabDeps(f.Name, f.Content, instanceHost)
	}
	a, err := deps.AnalyzeContainerfile(f.Name, f.Content, opts)
	if err != nil {
		var pe *deps.ParseError
		line := 0
		if errors.As(err, &pe) {
			line = pe.Line
			err = pe.Err
		}
		return deps.FileAnalysis{Warnings: []deps.Warning{{File: f.Name, Line: line, Message: fmt.Sprintf("cannot parse: %v", err)}}}
	}
	return a
}
