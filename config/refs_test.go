package config

import (
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/deps"
)

// The refs section, read and checked in the user's terms.
func TestRefs(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		problems   []string // each must be named; none: valid
	}{
		{"valid", `refs:
  - projects: [infra/base, "lang/*"]
    branches: [bookworm, "release/*"]
    tags: "v*"
    publish:
      main: ["{registry}/{path}:trixie"]
      "release/*": ["{registry}/{path}:{ref}"]
      tags: ["{registry}/{path}:{major}.{minor}"]
`, nil},
		{"every mistake at once", `refs:
  - projects: []
    branches: ["a..b", tags]
    tags: "v*"
    rebuild: newest
    publish:
      main: ["{registry}/{path}:{major}"]
      tags: ["{registry}/{path}:{build}"]
  - projects: [x/y]
    publish:
      tags: ["{registry}/{path}:{version}"]
`, []string{
			`refs[0].projects is empty`,
			`refs[0].branches[0] "a..b": not a branch or tag name`,
			`refs[0].branches[1]: a branch named "tags" cannot be followed beside release tags`,
			`refs[0].rebuild "newest": want latest-tag or branch`,
			`refs[0].publish.main[0] "{registry}/{path}:{major}": {major} is a part of a release tag: a branch has none`,
			`refs[0].publish.tags[0] "{registry}/{path}:{build}": unknown placeholder {build}`,
			`refs[1].publish.tags: the entry has no tags: glob`,
		}},
		{"unknown key", "refs:\n  - projects: [a/b]\n    branch: [x]\n", []string{"refs[0].branch"}},
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
				r, ok := cfg.RefRules().For("lang/ruby")
				if !ok || r.Rebuild != deps.RebuildLatestTag || !r.FollowsBranch("release/3.3") || !r.FollowsTag("v3.2.1") {
					t.Errorf("lang/ruby's rule %+v, %v", r, ok)
				}
				if _, ok := cfg.RefRules().For("apps/shop"); ok {
					t.Error("apps/shop matched a rule")
				}
				return
			}
			for _, p := range tc.problems {
				if err == nil || !strings.Contains(err.Error(), p) {
					t.Errorf("error %v, want it to say %q", err, p)
				}
			}
		})
	}
}
