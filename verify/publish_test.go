package verify_test

import (
	"reflect"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/verify"
)

func dep(kind deps.Kind, image, project string) deps.Dependency {
	img, err := deps.NormalizeImage(image)
	if err != nil {
		panic(err)
	}
	return deps.Dependency{Kind: kind, Ref: image, Image: img.Image, Repository: img.Repository, Tag: img.Tag, Digest: img.Digest, Project: project}
}

// What each project publishes: the references its downstreams make to it
// (FROM, COPY --from, with their tags), plus images.publish, judged
// against the images its built stage is FROM.
func TestPublished(t *testing.T) {
	const reg = "registry.example.com"
	projects := []verify.Project{
		{Path: "base/ruby", RegistryPrefix: reg + "/base/ruby",
			Dependencies: []deps.Dependency{dep(deps.KindFrom, "debian:12", "")},
			Built:        []string{"docker.io/library/debian:12"}},
		{Path: "apps/shop", RegistryPrefix: reg + "/apps/shop",
			Dependencies: []deps.Dependency{
				dep(deps.KindFrom, "golang:1.22", ""),
				dep(deps.KindFrom, reg+"/base/ruby:3", "base/ruby"),
				dep(deps.KindCopyFrom, reg+"/tools/assets:v2", "tools/assets"),
			},
			Built: []string{reg + "/base/ruby:3"}},
		{Path: "apps/admin", RegistryPrefix: reg + "/apps/admin",
			Dependencies: []deps.Dependency{
				dep(deps.KindFrom, reg+"/base/ruby:3.3", "base/ruby"),
				dep(deps.KindFrom, reg+"/base/ruby@sha256:"+strings.Repeat("a", 64), "base/ruby"), // a pin names no tag
				{Kind: deps.KindGitLabDeps, Project: "tools/assets"},
			}},
		{Path: "tools/assets", RegistryPrefix: reg + "/tools/assets"},
		{Path: "misc/noregistry"},
		// Pinned bases are judged against what their tag (or, for a
		// digest alone, their project's one image in that repository)
		// names now, never against the pin.
		{Path: "apps/pinned", RegistryPrefix: reg + "/apps/pinned",
			Dependencies: []deps.Dependency{
				dep(deps.KindFrom, reg+"/base/ruby:3@sha256:"+strings.Repeat("b", 64), "base/ruby"),
				dep(deps.KindFrom, reg+"/tools/assets@sha256:"+strings.Repeat("c", 64), "tools/assets"),
			},
			Built: []string{reg + "/base/ruby:3@sha256:" + strings.Repeat("b", 64), reg + "/tools/assets@sha256:" + strings.Repeat("c", 64)}},
	}
	rules := verify.PublishRules{
		Publish:   []string{"{registry}/{path}:latest"},
		Overrides: []verify.PublishOverride{{Match: "tools/*", Publish: []string{"{registry}/{path}/cli:{tag}"}}, {Match: "apps/admin"}, {Match: "apps/pinned", Publish: []string{"{registry}/{path}:1"}}},
	}
	got, errs := verify.Published(projects, rules)
	want := map[string][]verify.Image{
		"base/ruby": {
			{Image: reg + "/base/ruby:3", Upstreams: []string{"docker.io/library/debian:12"}},
			{Image: reg + "/base/ruby:3.3", Upstreams: []string{"docker.io/library/debian:12"}},
			{Image: reg + "/base/ruby:latest", Declared: true, Upstreams: []string{"docker.io/library/debian:12"}},
		},
		"apps/shop": {{Image: reg + "/apps/shop:latest", Declared: true, Upstreams: []string{reg + "/base/ruby:3"}}},
		// No Built: every FROM counts. The override publishes nothing more.
		"tools/assets": {{Image: reg + "/tools/assets:v2", Upstreams: nil}},
		"apps/pinned": {{Image: reg + "/apps/pinned:1", Declared: true,
			Upstreams: []string{reg + "/base/ruby:3", reg + "/tools/assets:v2"},
			Pins:      map[string]string{reg + "/base/ruby:3": "sha256:" + strings.Repeat("b", 64), reg + "/tools/assets:v2": "sha256:" + strings.Repeat("c", 64)}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Published =\n%+v\nwant\n%+v", got, want)
	}
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "{tag}") || !strings.Contains(errs[1].Error(), "misc/noregistry") || !strings.Contains(errs[1].Error(), "no container registry") {
		t.Errorf("errors %v, want the unknown placeholder and the project without a registry named", errs)
	}
}

func TestCheckTemplate(t *testing.T) {
	for _, tc := range []struct{ tmpl, err string }{
		{"{registry}/{path}:latest", ""},
		{"{registry}/{path}/cli:2", ""},
		{"registry.example.com/fixed/name:1", ""},
		{"{registry}/{path}:{branch}", "unknown placeholder {branch}"},
		{"{registry}/{path}@sha256:" + strings.Repeat("a", 64), "names a digest"},
		{"{registry}/{path}:la test", "invalid"},
	} {
		err := verify.CheckTemplate(tc.tmpl)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("CheckTemplate(%q) = %v, want %q", tc.tmpl, err, tc.err)
		}
	}
}

// TestPublishedByNodes: a project's nodes each publish what their ref
// does: the release tags the newest release's version parts (and latest),
// a maintenance branch its own tag, both on top of what downstreams name;
// each image is judged against its node's built stage.
func TestPublishedByNodes(t *testing.T) {
	const reg = "registry.example.com"
	rules := verify.PublishRules{Refs: deps.RefRules{{Projects: []string{"infra/base"}, Branches: []string{"bookworm"}, Tags: "v*",
		Publish: map[string][]string{"bookworm": {"{registry}/{path}:bookworm"}}}}}
	onNode := func(image, node string) deps.Dependency {
		d := dep(deps.KindFrom, image, "infra/base")
		d.Node = node
		return d
	}
	projects := []verify.Project{
		{Path: "infra/base", Ref: "main", RegistryPrefix: reg + "/infra/base", Built: []string{"docker.io/library/debian:13"}},
		{Path: "infra/base@bookworm", Kind: deps.NodeBranch, Ref: "bookworm", RegistryPrefix: reg + "/infra/base", Built: []string{"docker.io/library/debian:12"}},
		{Path: "infra/base@tags", Kind: deps.NodeTags, Ref: "v3.2.2", RegistryPrefix: reg + "/infra/base", Built: []string{"docker.io/library/debian:13"}},
		{Path: "lang/ruby", Ref: "main", RegistryPrefix: reg + "/lang/ruby", Built: []string{reg + "/infra/base:3"},
			Dependencies: []deps.Dependency{onNode(reg+"/infra/base:3", "infra/base@tags")}},
		{Path: "lang/ruby@bookworm", Kind: deps.NodeBranch, Ref: "bookworm", RegistryPrefix: reg + "/lang/ruby", Built: []string{reg + "/infra/base:bookworm"},
			Dependencies: []deps.Dependency{onNode(reg+"/infra/base:bookworm", "infra/base@bookworm")}},
	}
	got, errs := verify.Published(projects, rules)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	images := func(node string) []string {
		var out []string
		for _, im := range got[node] {
			out = append(out, im.Image)
		}
		return out
	}
	for node, want := range map[string][]string{
		"infra/base":          nil, // released by tags: main only tests
		"infra/base@bookworm": {reg + "/infra/base:bookworm"},
		"infra/base@tags":     {reg + "/infra/base:3", reg + "/infra/base:3.2", reg + "/infra/base:3.2.2", reg + "/infra/base:latest"},
	} {
		if g := images(node); !reflect.DeepEqual(g, want) {
			t.Errorf("%s publishes %q, want %q", node, g, want)
		}
	}
	if ups := got["infra/base@bookworm"][0].Upstreams; !reflect.DeepEqual(ups, []string{"docker.io/library/debian:12"}) {
		t.Errorf("base@bookworm judged against %q, want its own branch's base", ups)
	}
}

// TestPublishedForADigestPin: a reference pinned by digest alone names no
// tag, yet its upstream is verified: what the pin stands for (the tag the
// upstream publishes in that repository, else latest) is published, so
// the pin's new digest is known when its upstream is rebuilt.
func TestPublishedForADigestPin(t *testing.T) {
	pin := "sha256:" + strings.Repeat("1", 64)
	projects := []verify.Project{
		{Path: "g/ruby", RegistryPrefix: "r/g/ruby"},
		{Path: "g/base", RegistryPrefix: "r/g/base"},
		{Path: "g/app", Dependencies: []deps.Dependency{
			{Kind: deps.KindFrom, Image: "r/g/ruby@" + pin, Repository: "r/g/ruby", Digest: pin, Pinned: true, Project: "g/ruby"},
			{Kind: deps.KindFrom, Image: "r/g/base@" + pin, Repository: "r/g/base", Digest: pin, Pinned: true, Project: "g/base"},
		}},
		{Path: "g/cli", Dependencies: []deps.Dependency{
			{Kind: deps.KindFrom, Image: "r/g/base:3", Repository: "r/g/base", Tag: "3", Project: "g/base"},
		}},
	}
	out, errs := verify.Published(projects, verify.PublishRules{})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	names := func(p string) (s []string) {
		for _, i := range out[p] {
			s = append(s, i.Image)
		}
		return s
	}
	if got := names("g/ruby"); strings.Join(got, ",") != "r/g/ruby:latest" {
		t.Errorf("g/ruby publishes %v, want r/g/ruby:latest (its digest pin's tag)", got)
	}
	if got := names("g/base"); strings.Join(got, ",") != "r/g/base:3" {
		t.Errorf("g/base publishes %v, want r/g/base:3 alone (the one tag it publishes there)", got)
	}
}
