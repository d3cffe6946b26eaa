package scan

import (
	"errors"
	"fmt"
	"strings"

	"gitlab.com/depsd/depsd/deps"
)

// Analyze parses the stored files of every project, fills in their
// Dependencies, File, Built and Warnings (appending to warnings already there),
// maps images and .gitlab-deps entries to the projects in the list, and
// returns the dependency graph of those projects (GraphOf: the same
// rules as the graph later read back from the store).
//
// registry, when set, overrides each project's registry prefix with
// registry/<lower-case path>. instanceHost is the GitLab host that
// .gitlab-deps URLs must name. opts say how Containerfiles are read (the
// platforms).
func Analyze(projects []Project, registry, instanceHost string, opts deps.Options) *deps.Graph {
	prefixes := make(map[string]string, len(projects))
	byLowerPath := make(map[string]string, len(projects))
	for _, p := range projects {
		prefix := p.RegistryPrefix
		if registry != "" {
			prefix = strings.TrimSuffix(registry, "/") + "/" + strings.ToLower(p.Path)
		}
		if prefix != "" {
			prefixes[prefix] = p.Path
		}
		byLowerPath[strings.ToLower(p.Path)] = p.Path
	}
	images := deps.NewRegistryMap(prefixes)

	for i := range projects {
		p := &projects[i]
		p.Dependencies, p.File, p.Built = nil, "", nil
		for _, f := range p.Files {
			a := analyzeFile(f, instanceHost, opts)
			if f.Name != deps.GitLabDepsFile {
				p.File, p.Built = f.Name, a.Built
			}
			p.Warnings = append(p.Warnings, a.Warnings...)
			for _, d := range a.Dependencies {
				warn := func(format string, args ...any) {
					p.Warnings = append(p.Warnings, deps.Warning{File: f.Name, Line: d.Line, Message: fmt.Sprintf(format, args...)})
				}
				switch {
				case d.Kind == deps.KindGitLabDeps:
					if canonical, ok := byLowerPath[strings.ToLower(d.Project)]; ok {
						d.Project = canonical
					} else {
						warn("upstream %s is not in depsd's scope: its pipelines are not watched", d.Project)
					}
				case d.Repository != "":
					d.Project, _ = images.Project(d.Repository)
				}
				if d.Project == p.Path {
					// A project building FROM its own image would trigger
					// itself forever: the graph leaves it out.
					warn("%s is this project's own image: not an upstream", d.Ref)
				}
				p.Dependencies = append(p.Dependencies, d)
			}
		}
	}
	return GraphOf(projects)
}

// analyzeFile parses one stored file. A file that cannot be built becomes
// a warning with its line: the project declares nothing until it is fixed
// (its own pipeline fails too).
func analyzeFile(f File, instanceHost string, opts deps.Options) deps.FileAnalysis {
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
