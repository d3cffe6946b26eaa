package config

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"gitlab.com/depsd/depsd/chain"
)

// Premerge is one entry of `premerge:`: for the projects it matches, their
// merge requests' candidate images are built on by their dependents
// before the merge, and the answer goes on the merge request
// (docs/validation.md).
type Premerge struct {
	// Projects are project paths or globs (* within a segment).
	Projects []string `yaml:"projects"`
	// Label, when set, validates only merge requests carrying it.
	Label string `yaml:"label"`
	// Depth is 1 (the direct dependents, the default) or all.
	Depth string `yaml:"depth"`
	// Candidate is where the merge request pipeline pushed its image:
	// {registry}, {path} and {iid}; default {registry}/{path}:mr-{iid}
	// (the build component's).
	Candidate string `yaml:"candidate"`
}

// PremergeRules are `premerge:` as the engine reads it (nil when empty:
// no validations).
func (c Config) PremergeRules() chain.PremergeRules {
	if len(c.Premerge) == 0 {
		return nil
	}
	out := make(chain.PremergeRules, 0, len(c.Premerge))
	for _, p := range c.Premerge {
		out = append(out, chain.PremergeRule{Projects: p.Projects, Label: p.Label, Depth: chain.ValidationDepth(p.Depth), Candidate: p.Candidate})
	}
	return out
}

// PremergeCovers says whether premerge covers a project, for the webhook
// receiver (nil when nothing is covered).
func (c Config) PremergeCovers() func(project string) bool {
	rules := c.PremergeRules()
	if rules == nil {
		return nil
	}
	return rules.Covers
}

// premergeProblems checks `premerge:`.
func (c Config) premergeProblems() Problems {
	var errs Problems
	var depths []string
	for _, d := range chain.ValidationDepths() {
		depths = append(depths, string(d))
	}
	for i, p := range c.Premerge {
		at := fmt.Sprintf("premerge[%d]", i)
		if len(p.Projects) == 0 {
			errs = append(errs, fmt.Errorf("%s.projects is empty: name the projects (paths or globs such as infra/*) whose merge requests are validated", at))
		}
		for j, g := range p.Projects {
			if _, err := path.Match(g, ""); err != nil || g == "" {
				errs = append(errs, fmt.Errorf("%s.projects[%d] %q: want a project path or a glob such as group/*", at, j, g))
			}
		}
		if p.Depth != "" && !slices.Contains(depths, p.Depth) {
			errs = append(errs, fmt.Errorf("%s.depth %q: want %s", at, p.Depth, strings.Join(depths, " or ")))
		}
		if p.Candidate != "" {
			if err := chain.CheckCandidate(p.Candidate); err != nil {
				errs = append(errs, fmt.Errorf("%s.candidate %q: %v", at, p.Candidate, err))
			}
		}
		if strings.ContainsAny(p.Label, ",\n") {
			errs = append(errs, fmt.Errorf("%s.label %q: one label, without a comma", at, p.Label))
		}
	}
	return errs
}
