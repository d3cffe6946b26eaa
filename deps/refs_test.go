package deps

import (
	"regexp"
	"strings"
	"testing"
)

func TestNodeKeys(t *testing.T) {
	for _, tc := range []struct {
		path   string
		kind   NodeKind
		branch string
		key    string
	}{
		{"lang/ruby", NodeDefault, "", "lang/ruby"},
		{"lang/ruby", NodeBranch, "bookworm", "lang/ruby@bookworm"},
		{"lang/ruby", NodeBranch, "release/3.2", "lang/ruby@release/3.2"},
		{"infra/base", NodeTags, "", "infra/base@tags"},
	} {
		key := NodeKey(tc.path, tc.kind, tc.branch)
		if key != tc.key {
			t.Errorf("NodeKey(%s, %d, %s) = %s, want %s", tc.path, tc.kind, tc.branch, key, tc.key)
		}
		path, kind, branch := ParseNode(key)
		if path != tc.path || kind != tc.kind || branch != tc.branch || NodeProject(key) != tc.path {
			t.Errorf("ParseNode(%s) = %s, %d, %s", key, path, kind, branch)
		}
	}
	if got := NodeLabel("lang/ruby", true, "main"); got != "lang/ruby@main" {
		t.Errorf("label of a default branch beside others = %s", got)
	}
	if got := NodeLabel("lang/ruby", false, "main"); got != "lang/ruby" {
		t.Errorf("label of a lone node = %s", got)
	}
}

func TestWildcardMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"main", "main", true},
		{"main", "mains", false},
		{"release/*", "release/3.2", true},
		{"release/*", "release/a/b", true}, // GitLab's * spans slashes
		{"release/*", "release", false},
		{"v*", "v3.2.1", true},
		{"v*", "3.2.1", false},
		{"*-stable", "3-2-stable", true},
		{"*-stable", "stable", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXcYb", false},
		{"*", "", true},
	} {
		if got := WildcardMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("WildcardMatch(%q, %q) = %v", tc.pattern, tc.s, got)
		}
	}
}

func TestLatestRelease(t *testing.T) {
	tags := []string{"v3.2.1", "v3.10.0-rc.1", "v3.9.9", "v3.2.10", "nightly", "v4", "w9.9.9", "v3.10.0"}
	r, ok := LatestRelease(tags, "v*")
	if !ok || r.Tag != "v4" || r.Version() != "4" {
		t.Errorf("latest of %v = %+v, want v4", tags, r)
	}
	r, ok = LatestRelease(tags[:4], "v*")
	if !ok || r.Tag != "v3.9.9" { // v3.10.0-rc.1 is a pre-release
		t.Errorf("latest release = %+v, want v3.9.9 (no pre-release)", r)
	}
	if _, ok := LatestRelease([]string{"nightly", "latest"}, "*"); ok {
		t.Error("tags that are no versions gave a release")
	}
	if r, _ := ParseRelease("v3.2.1-rc.1"); r.Major != 3 || r.Minor != 2 || r.Patch != 1 || r.Pre != "rc.1" || r.Version() != "3.2.1-rc.1" {
		t.Errorf("ParseRelease = %+v", r)
	}
}

func TestPublishTemplates(t *testing.T) {
	const prefix = "registry.example.com/infra/base"
	rel, _ := ParseRelease("v3.2.1")
	for _, tc := range []struct {
		tmpl   string
		kind   NodeKind
		branch string
		want   string // expanded; "" when refused
		err    string
	}{
		{"{registry}/{path}:{ref}", NodeBranch, "release/3.2", "registry.example.com/infra/base:release-3.2", ""},
		{"{registry}/{path}:trixie", NodeDefault, "", "registry.example.com/infra/base:trixie", ""},
		{"{registry}/{path}:{version}", NodeTags, "", "registry.example.com/infra/base:3.2.1", ""},
		{"{registry}/{path}:{major}.{minor}", NodeTags, "", "registry.example.com/infra/base:3.2", ""},
		{"{registry}/{path}:{tag}", NodeTags, "", "registry.example.com/infra/base:v3.2.1", ""},
		{"{registry}/{path}:{major}", NodeBranch, "main", "", "part of a release tag"},
		{"{registry}/{path}:{branch}", NodeBranch, "main", "", "unknown placeholder {branch}"},
		{"{registry}/{path}", NodeDefault, "", "", "names no tag"},
	} {
		got, err := ExpandPublish(tc.tmpl, prefix, tc.kind, tc.branch, rel)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ExpandPublish(%s) = %s, %v; want an error saying %q", tc.tmpl, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ExpandPublish(%s) = %s, %v; want %s", tc.tmpl, got, err, tc.want)
		}
		pat, err := CompilePublish(tc.tmpl, prefix, tc.kind, tc.branch)
		if err != nil || !pat.Matches(tc.want) {
			t.Errorf("CompilePublish(%s) does not match its own expansion %s (%v)", tc.tmpl, tc.want, err)
		}
	}
	// A release template matches every release of its shape.
	pat, _ := CompilePublish("{registry}/{path}:{major}", prefix, NodeTags, "")
	for ref, want := range map[string]bool{
		prefix + ":3": true, prefix + ":4": true, prefix + ":3.2": false, prefix + ":latest": false,
		"registry.example.com/infra/other:3": false, "REGISTRY.example.com/Infra/Base:3": true,
	} {
		if got := pat.Matches(ref); got != want {
			t.Errorf("{major} matches %s: %v, want %v", ref, got, want)
		}
	}
}

// The fleet of docs/design/nodes.md: base released by tags and kept on a
// maintenance branch, ruby on two branches, an app on the default branch.
func TestNodeResolverFleet(t *testing.T) {
	const reg = "registry.example.com"
	rel, _ := ParseRelease("v3.2.2")
	rules := RefRules{{
		Projects: []string{"infra/base", "lang/*"},
		Branches: []string{"bookworm", "release/*"},
		Tags:     "v*",
		Publish: map[string][]string{
			"main":     {"{registry}/{path}:trixie"},
			"bookworm": {"{registry}/{path}:bookworm"},
		},
	}}
	base, _ := rules.For("infra/base")
	ruby, _ := rules.For("lang/ruby")
	if _, ok := rules.For("apps/shop"); ok {
		t.Fatal("apps/shop matched a rule")
	}
	projects := []ProjectRefs{
		{Path: "infra/base", RegistryPrefix: reg + "/infra/base", DefaultBranch: "main", Rule: base, Branches: []string{"bookworm"}, Release: &rel},
		{Path: "lang/ruby", RegistryPrefix: reg + "/lang/ruby", DefaultBranch: "main", Rule: ruby, Branches: []string{"bookworm", "release/3.3"}},
		{Path: "apps/shop", RegistryPrefix: reg + "/apps/shop", DefaultBranch: "main"},
	}
	seen := map[string]Seen{reg + "/lang/ruby:3": {Node: "lang/ruby", PipelineID: 7}}
	r, errs := NewNodeResolver(projects, seen)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	for _, tc := range []struct {
		project, image, node string
		how                  EdgeSource
	}{
		{"infra/base", reg + "/infra/base:trixie", "infra/base", EdgeConfigured},
		{"infra/base", reg + "/infra/base:bookworm", "infra/base@bookworm", EdgeConfigured},
		{"infra/base", reg + "/infra/base:3", "infra/base@tags", EdgeConfigured},
		{"infra/base", reg + "/infra/base:3.2", "infra/base@tags", EdgeConfigured},
		{"infra/base", reg + "/infra/base:3.2.2", "infra/base@tags", EdgeConfigured},
		{"infra/base", reg + "/infra/base:latest", "infra/base@tags", EdgeConfigured},
		{"infra/base", reg + "/infra/base:3@sha256:" + strings.Repeat("a", 64), "infra/base@tags", EdgeConfigured},
		{"infra/base", reg + "/infra/base:debug", "infra/base", EdgeDefault},
		{"infra/base", reg + "/infra/base@sha256:" + strings.Repeat("a", 64), "infra/base", EdgeDefault},
		{"lang/ruby", reg + "/lang/ruby:release-3.3", "lang/ruby@release/3.3", EdgeConfigured},
		{"lang/ruby", reg + "/lang/ruby:3", "lang/ruby", EdgeSeen},
		{"apps/shop", reg + "/apps/shop:latest", "apps/shop", EdgeConfigured},
		{"apps/shop", reg + "/apps/shop:v2", "apps/shop", EdgeDefault},
		{"not/known", reg + "/not/known:1", "not/known", EdgeDefault},
	} {
		node, how := r.Node(tc.project, tc.image)
		if node != tc.node || how != tc.how {
			t.Errorf("Node(%s, %s) = %s (%s), want %s (%s)", tc.project, tc.image, node, how, tc.node, tc.how)
		}
	}
	// main publishes :trixie here; without a template of its own the
	// default branch of a tag-released project publishes nothing, so
	// latest is the releases' alone.
	if c := r.Conflicts("infra/base", []string{reg + "/infra/base:latest", reg + "/infra/base:trixie"}); len(c) != 0 {
		t.Errorf("conflicts %v", c)
	}
	clash, _ := NewNodeResolver([]ProjectRefs{{Path: "x/y", RegistryPrefix: reg + "/x/y", DefaultBranch: "main",
		Rule: RefRule{Branches: []string{"next"}, Publish: map[string][]string{"main": {"{registry}/{path}:edge"}, "next": {"{registry}/{path}:edge"}}}, Branches: []string{"next"}}}, nil)
	if c := clash.Conflicts("x/y", []string{reg + "/x/y:edge"}); len(c) != 1 || !strings.Contains(c[0], "x/y and x/y@next") {
		t.Errorf("two nodes publishing :edge: conflicts %v", c)
	}
}

// TestPublishPatternsCompile: a pattern's regular expression is compiled
// when it is first matched, and its error would then be lost (the pattern
// would match nothing): whatever the template, prefix and branch a user
// gives, CompilePublish either refuses them or builds one that compiles.
// And nothing is compiled before a match is asked for.
func TestPublishPatternsCompile(t *testing.T) {
	odd := []string{"", "a", "(", ")", "[", "]", "\\", "*", "+", "?", "{", "}", "|", "^", "$", ".", "{ref}", "{tag}",
		"{version}", "{major}", "{minor}", "{patch}", "{registry}", "{path}", ":", "/", "é", "\\E", "(?i)"}
	for _, a := range odd {
		for _, b := range odd {
			for _, kind := range []NodeKind{NodeDefault, NodeBranch, NodeTags} {
				tmpl := "{registry}/{path}" + a + ":" + b + "x" + a
				for _, prefix := range []string{"registry.example.com/g/p" + a, "host" + b + "/g/p"} {
					pat, err := CompilePublish(tmpl, prefix, kind, "release/"+a+b)
					if err != nil {
						continue
					}
					if pat.re.re != nil {
						t.Fatalf("CompilePublish(%q) compiled its expression before any match", tmpl)
					}
					if _, err := regexp.Compile(pat.re.src); err != nil {
						t.Errorf("CompilePublish(%q, %q) built %q, which does not compile: %v", tmpl, prefix, pat.re.src, err)
					}
				}
			}
		}
	}
}
