package gitlab

import (
	"fmt"
	"path"
	"strings"
)

// Scope says which projects depsd manages.
type Scope struct {
	// Instance is every project the token can see on the instance (GET
	// /projects, read with keyset pagination: it has no 50,000-row limit).
	Instance bool
	// Groups are full group paths (or numeric ids); all their subgroups are
	// included.
	Groups []string
	// Projects are single projects by path_with_namespace (or numeric id).
	Projects []string
	// Exclude are globs on path_with_namespace. A pattern is matched with
	// path.Match ("g/*" is the direct children of g), and a pattern ending
	// in "/**" matches a whole subtree ("g/legacy/**" is every project
	// below g/legacy; the part before /** may itself contain globs).
	Exclude []string
}

// excluder matches paths against validated Exclude patterns.
type excluder struct {
	exact   []string // path.Match patterns
	subtree []string // patterns for an ancestor namespace
}

func newExcluder(patterns []string) (excluder, error) {
	var ex excluder
	for _, p := range patterns {
		p = strings.Trim(strings.TrimSpace(p), "/")
		if p == "" {
			continue
		}
		p = strings.ToLower(p)
		if prefix, ok := strings.CutSuffix(p, "/**"); ok {
			if _, err := path.Match(prefix, ""); err != nil {
				return excluder{}, fmt.Errorf("exclude pattern %q: %w", p, err)
			}
			ex.subtree = append(ex.subtree, prefix)
			continue
		}
		if strings.Contains(p, "**") {
			return excluder{}, fmt.Errorf("exclude pattern %q: ** is only supported as a final /** segment", p)
		}
		if _, err := path.Match(p, ""); err != nil {
			return excluder{}, fmt.Errorf("exclude pattern %q: %w", p, err)
		}
		ex.exact = append(ex.exact, p)
	}
	return ex, nil
}

// excluded reports whether a project path is excluded, and by which
// pattern. GitLab paths are case-insensitive, so matching is too.
func (ex excluder) excluded(p string) (string, bool) {
	p = strings.ToLower(p)
	for _, pat := range ex.exact {
		if ok, _ := path.Match(pat, p); ok {
			return pat, true
		}
	}
	segs := strings.Split(p, "/")
	for _, pat := range ex.subtree {
		// Match the pattern against every proper ancestor of the project.
		for i := 1; i < len(segs); i++ {
			if ok, _ := path.Match(pat, strings.Join(segs[:i], "/")); ok {
				return pat + "/**", true
			}
		}
	}
	return "", false
}
