package store

import (
	"reflect"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/verify"
)

// builtProjects are a scan's projects as verification sees them: a base on
// an external image, a multi-stage app whose builder stage is FROM
// golang (not its base), and a project without a Containerfile.
func builtProjects() []scan.Project {
	const reg = "registry.example.com/"
	from := func(ref, image, repo, tag, project string) deps.Dependency {
		return deps.Dependency{Kind: deps.KindFrom, Line: 1, Ref: ref, Image: image, Repository: repo, Tag: tag, Project: project}
	}
	return []scan.Project{
		{ID: 1, Path: "g/base", DefaultBranch: "main", RegistryPrefix: reg + "g/base", File: "Containerfile",
			Files:        []scan.File{{Name: "Containerfile", Content: []byte("FROM debian:12\n")}},
			Dependencies: []deps.Dependency{from("debian:12", "docker.io/library/debian:12", "docker.io/library/debian", "12", "")},
			Built:        []string{"docker.io/library/debian:12"}},
		{ID: 2, Path: "g/shop", DefaultBranch: "main", RegistryPrefix: reg + "g/shop", File: "Containerfile",
			Files: []scan.File{{Name: "Containerfile",
				Content: []byte("FROM golang:1.22 AS build\nFROM " + reg + "g/base:1\nCOPY --from=build /app /app\n")}},
			Dependencies: []deps.Dependency{
				from("golang:1.22", "docker.io/library/golang:1.22", "docker.io/library/golang", "1.22", ""),
				from(reg+"g/base:1", reg+"g/base:1", reg+"g/base", "1", "g/base"),
			},
			Built: []string{reg + "g/base:1"}},
		// No Containerfile known: every FROM counts (none here); its
		// references to g/shop still name what g/shop publishes.
		{ID: 3, Path: "g/web", DefaultBranch: "main", RegistryPrefix: reg + "g/web", File: "Dockerfile",
			Dependencies: []deps.Dependency{
				from(reg+"g/shop:2", reg+"g/shop:2", reg+"g/shop", "2", "g/shop"),
				{Kind: deps.KindCopyFrom, Line: 2, Ref: "alpine@sha256:abc", Image: "docker.io/library/alpine@sha256:abc",
					Repository: "docker.io/library/alpine", Digest: "sha256:abc"},
				{Kind: deps.KindGitLabDeps, Line: 1, Ref: "g/base", Project: "g/base"},
			}},
	}
}

// What verification reads of the stored projects: the built stage's bases
// each scan recorded, and of the dependencies only those that decide what
// is published; what it decides from them is what it would decide from
// the whole projects.
func TestVerifyProjects(t *testing.T) { forEachBackend(t, testVerifyProjects) }

func testVerifyProjects(t *testing.T, b backend) {
	ctx := t.Context()
	s, _ := b.openTemp(t)
	projects := builtProjects()
	if err := s.ApplyScan(ctx, projects, scan.Meta{StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	got, err := s.VerifyProjects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const reg = "registry.example.com/"
	want := []verify.Project{
		{Path: "g/base", Ref: "main", RegistryPrefix: reg + "g/base", Built: []string{"docker.io/library/debian:12"}},
		{Path: "g/shop", Ref: "main", RegistryPrefix: reg + "g/shop", Built: []string{reg + "g/base:1"},
			Dependencies: []deps.Dependency{{Kind: deps.KindFrom, Image: reg + "g/base:1", Repository: reg + "g/base", Tag: "1", Project: "g/base"}}},
		{Path: "g/web", Ref: "main", RegistryPrefix: reg + "g/web",
			Dependencies: []deps.Dependency{{Kind: deps.KindFrom, Image: reg + "g/shop:2", Repository: reg + "g/shop", Tag: "2", Project: "g/shop"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("VerifyProjects() =\n%+v\nwant\n%+v", got, want)
	}

	// The same published images as from the whole projects.
	whole, err := s.Projects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var in []verify.Project
	for _, p := range whole {
		in = append(in, verify.Project{Path: p.Path, RegistryPrefix: p.RegistryPrefix, Dependencies: p.Dependencies, Built: p.Built})
	}
	rules := verify.PublishRules{Publish: []string{"{registry}/{path}:latest"}}
	fromWhole, _ := verify.Published(in, rules)
	fromStored, _ := verify.Published(got, rules)
	if !reflect.DeepEqual(fromStored, fromWhole) {
		t.Errorf("published from VerifyProjects =\n%+v\nfrom the whole projects\n%+v", fromStored, fromWhole)
	}
	if shop := fromStored["g/shop"]; len(shop) != 2 || !reflect.DeepEqual(shop[0].Upstreams, []string{reg + "g/base:1"}) {
		t.Errorf("g/shop publishes %+v: want its images judged against g/base:1 alone (golang is a builder stage's)", shop)
	}

	// A rescan that changes only the built stage's bases (a Containerfile
	// whose last stage now starts from golang) stores them.
	projects[1].Built = []string{"docker.io/library/golang:1.22"}
	if err := s.ApplyScan(ctx, projects, scan.Meta{StartedAt: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	got, err = s.VerifyProjects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got[1].Built, projects[1].Built) {
		t.Errorf("g/shop's built stage bases after a rescan = %q, want %q", got[1].Built, projects[1].Built)
	}
}
