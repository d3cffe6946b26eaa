package config

import (
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/chain"
)

// The premerge section (validations before the merge), read and checked in
// the user's terms, and derived into the engine's rules; off by default.
func TestPremerge(t *testing.T) {
	cfg, err := Load(Source{ReadFile: fakeFS{}.read})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PremergeRules() != nil || cfg.PremergeCovers() != nil {
		t.Fatalf("premerge is on by default: %+v", cfg.Premerge)
	}
	for _, tc := range []struct {
		name, file string
		problems   []string
	}{
		{"valid", `premerge:
  - projects: [infra/base, "lang/*"]
    label: depsd::validate
    depth: all
  - projects: [tools/*]
    depth: 1
    candidate: "{registry}/{path}/candidates:mr-{iid}"
`, nil},
		{"every mistake at once", `premerge:
  - projects: []
    depth: 2
    candidate: "{registry}/{path}:{branch}"
  - projects: ["tools/["]
    label: "a,b"
`, []string{
			`premerge[0].projects is empty`,
			`premerge[0].depth "2": want 1 or all`,
			`premerge[0].candidate "{registry}/{path}:{branch}": unknown placeholder {branch}`,
			`premerge[1].projects[0] "tools/["`,
			`premerge[1].label "a,b"`,
		}},
		{"unknown key", "premerge:\n  - projects: [a/b]\n    dept: all\n", []string{"premerge[0].dept"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load(Source{ReadFile: fakeFS{"depsd.yaml": tc.file}.read})
			if err == nil {
				err = cfg.Validate()
			}
			if len(tc.problems) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				r := cfg.PremergeRules()
				for project, want := range map[string]chain.PremergeRule{
					"infra/base": {Label: "depsd::validate", Depth: chain.DepthAll, Candidate: chain.DefaultCandidate},
					"lang/ruby":  {Label: "depsd::validate", Depth: chain.DepthAll, Candidate: chain.DefaultCandidate},
					"tools/cli":  {Depth: chain.DepthDirect, Candidate: "{registry}/{path}/candidates:mr-{iid}"},
				} {
					got, ok := r.For(project)
					if !ok || got.Label != want.Label || got.Depth != want.Depth || got.Candidate != want.Candidate {
						t.Errorf("%s: %+v, %v; want %+v", project, got, ok, want)
					}
				}
				if _, ok := r.For("apps/shop"); ok || cfg.PremergeCovers()("apps/shop") || !cfg.PremergeCovers()("lang/ruby@bookworm") {
					t.Error("premerge covers the wrong projects")
				}
				return
			}
			if err == nil {
				t.Fatalf("no problem found; want %v", tc.problems)
			}
			for _, p := range tc.problems {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("%v\ndoes not say %q", err, p)
				}
			}
		})
	}
}
