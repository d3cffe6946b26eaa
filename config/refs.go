package config

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"gitlab.com/depsd/depsd/deps"
)

// Refs is one entry of `refs:`: for the projects it matches, the branches
// followed beside the default branch, whether release tags count, what a
// rebuild of a tag-released project creates, and what each ref publishes
// (docs/configuration.md#refs, docs/chains.md).
type Refs struct {
	// Projects are project paths or globs (* within a segment).
	Projects []string `yaml:"projects"`
	// Branches are names or wildcards (* spans slashes, as in GitLab).
	Branches []string `yaml:"branches"`
	// Tags is the glob of release tags, such as "v*"; empty: none.
	Tags string `yaml:"tags"`
	// Rebuild is latest-tag (default) or branch.
	Rebuild string `yaml:"rebuild"`
	// Publish maps a branch (name or wildcard) or "tags" to templates.
	Publish map[string][]string `yaml:"publish"`
}

// RefRules is `refs:` as deps reads it.
func (c Config) RefRules() deps.RefRules {
	out := make(deps.RefRules, 0, len(c.Refs))
	for _, r := range c.Refs {
		mode := deps.RebuildMode(r.Rebuild)
		if mode == "" {
			mode = deps.RebuildLatestTag
		}
		out = append(out, deps.RefRule{Projects: r.Projects, Branches: r.Branches, Tags: r.Tags, Rebuild: mode, Publish: r.Publish})
	}
	return out
}

// refsProblems checks `refs:`.
func (c Config) refsProblems() Problems {
	var errs Problems
	for i, r := range c.Refs {
		at := fmt.Sprintf("refs[%d]", i)
		if len(r.Projects) == 0 {
			errs = append(errs, fmt.Errorf("%s.projects is empty: name the projects (paths or globs such as lang/*) this entry is for", at))
		}
		for j, p := range r.Projects {
			if _, err := path.Match(p, ""); err != nil || p == "" {
				errs = append(errs, fmt.Errorf("%s.projects[%d] %q: want a project path or a glob such as group/*", at, j, p))
			}
		}
		for j, b := range r.Branches {
			if err := checkRefName(b); err != nil {
				errs = append(errs, fmt.Errorf("%s.branches[%d] %q: %v", at, j, b, err))
			}
			if b == deps.TagsRef && r.Tags != "" {
				errs = append(errs, fmt.Errorf("%s.branches[%d]: a branch named %q cannot be followed beside release tags (its node would be the releases'); rename the branch or drop tags", at, j, b))
			}
		}
		if r.Tags != "" {
			if err := checkRefName(r.Tags); err != nil {
				errs = append(errs, fmt.Errorf("%s.tags %q: %v", at, r.Tags, err))
			}
		}
		if r.Rebuild != "" && r.Rebuild != string(deps.RebuildLatestTag) && r.Rebuild != string(deps.RebuildBranch) {
			errs = append(errs, fmt.Errorf("%s.rebuild %q: want %s or %s", at, r.Rebuild, deps.RebuildLatestTag, deps.RebuildBranch))
		}
		keys := make([]string, 0, len(r.Publish))
		for k := range r.Publish {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			kind := deps.NodeBranch
			if k == deps.TagsRef {
				kind = deps.NodeTags
				if r.Tags == "" {
					errs = append(errs, fmt.Errorf("%s.publish.tags: the entry has no tags: glob, so no release publishes it", at))
				}
			} else if err := checkRefName(k); err != nil {
				errs = append(errs, fmt.Errorf("%s.publish key %q: %v", at, k, err))
			}
			for j, t := range r.Publish[k] {
				if err := deps.CheckPublishTemplate(t, kind); err != nil {
					errs = append(errs, fmt.Errorf("%s.publish.%s[%d] %q: %v", at, k, j, t, err))
				}
			}
		}
	}
	return errs
}

// checkRefName accepts a branch or tag name, or a wildcard of them: what
// git allows in a ref (git check-ref-format), '*' being the wildcard.
func checkRefName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty")
	case strings.ContainsAny(name, " ~^:?[\\\x7f") || strings.Contains(name, ".."), strings.Contains(name, "@{"):
		return fmt.Errorf("not a branch or tag name: git refuses space, ~ ^ : ? [ \\ and ..")
	case strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".") || strings.HasPrefix(name, "-"):
		return fmt.Errorf("not a branch or tag name")
	}
	return nil
}

// Follows says whether a pipeline or push of project's ref (a tag when
// tag) is of a node refs: follows besides the default branch: what the
// webhook receiver keeps of deliveries other than the default branch's.
func (c Config) Follows() func(project, ref string, tag bool) bool {
	rules := c.RefRules()
	if len(rules) == 0 {
		return nil
	}
	return func(project, ref string, tag bool) bool {
		rule, ok := rules.For(project)
		switch {
		case !ok:
			return false
		case tag:
			return rule.FollowsTag(ref)
		}
		return rule.FollowsBranch(ref)
	}
}
