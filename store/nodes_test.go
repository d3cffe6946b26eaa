package store

import (
	"reflect"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
)

func TestNodes(t *testing.T) { forEachBackend(t, testNodes) }

// testNodes: a project's nodes besides its default branch (a maintenance
// branch, its release tags) are stored with their own files,
// dependencies and warnings, read back as they were, and are nodes of the
// graph with edges to the node each reference names, including between
// two nodes of one project; a later scan that drops a node drops its rows.
func testNodes(t *testing.T, b backend) {
	ctx := t.Context()
	s, _ := b.openTemp(t)
	file := func(name, content string) []scan.File { return []scan.File{{Name: name, Content: []byte(content)}} }
	dep := func(ref, project, node string, via deps.EdgeSource) deps.Dependency {
		return deps.Dependency{Kind: deps.KindFrom, Line: 1, Ref: ref, Image: ref, Repository: ref[:len(ref)-2], Tag: ref[len(ref)-1:], Project: project, Node: node, Via: via}
	}
	projects := []scan.Project{
		{ID: 1, Path: "infra/base", DefaultBranch: "main", Files: file("Containerfile", "FROM scratch\n"),
			Refs: []scan.Ref{
				{Node: "infra/base@bookworm", Kind: deps.NodeBranch, Ref: "bookworm", HeadCommit: "blobs:b", File: "Containerfile",
					Files: file("Containerfile", "FROM debian:bookworm\n"), Warnings: []deps.Warning{{File: "Containerfile", Line: 1, Message: "w"}}},
				{Node: "infra/base@tags", Kind: deps.NodeTags, Ref: "v3.2.2", HeadCommit: "blobs:t", File: "Containerfile",
					Files: file("Containerfile", "FROM r/infra/base:b\n"), Built: []string{"r/infra/base:b"},
					Dependencies: []deps.Dependency{dep("r/infra/base:b", "infra/base", "infra/base@bookworm", deps.EdgeConfigured)}},
			}},
		{ID: 2, Path: "lang/ruby", DefaultBranch: "main", Files: file("Containerfile", "FROM r/infra/base:3\n"),
			Dependencies: []deps.Dependency{dep("r/infra/base:3", "infra/base", "infra/base@tags", deps.EdgeConfigured)},
			Refs: []scan.Ref{{Node: "lang/ruby@bookworm", Kind: deps.NodeBranch, Ref: "bookworm",
				Files:        file("Containerfile", "FROM r/infra/base:b\n"),
				Dependencies: []deps.Dependency{dep("r/infra/base:b", "infra/base", "infra/base@bookworm", deps.EdgeSeen)}}}},
		{ID: 3, Path: "apps/shop", DefaultBranch: "main",
			Dependencies: []deps.Dependency{dep("r/lang/ruby:l", "lang/ruby", "", deps.EdgeDefault)}},
	}
	if err := s.ApplyScan(ctx, projects, scan.Meta{StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Projects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []scan.Project{projects[2], projects[0], projects[1]} // by path
	for i := range got {
		got[i].ScannedAt, got[i].LastActivity, got[i].HeadCheckedAt = time.Time{}, time.Time{}, time.Time{}
		if !reflect.DeepEqual(got[i].Refs, want[i].Refs) || !reflect.DeepEqual(got[i].Dependencies, want[i].Dependencies) {
			t.Errorf("%s read back as\n%+v\nwant\n%+v", got[i].Path, got[i], want[i])
		}
	}
	g, err := s.Graph(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []*deps.Graph{g, scan.GraphOf(projects)} {
		if got, want := g.Projects(), []string{"apps/shop", "infra/base", "infra/base@bookworm", "infra/base@tags", "lang/ruby", "lang/ruby@bookworm"}; !reflect.DeepEqual(got, want) {
			t.Errorf("nodes %q, want %q", got, want)
		}
		for node, want := range map[string][]string{
			"infra/base@bookworm": {"infra/base@tags", "lang/ruby@bookworm"},
			"infra/base@tags":     {"lang/ruby"},
			"lang/ruby":           {"apps/shop"},
			"infra/base":          nil,
		} {
			if got := g.Downstream(node); !reflect.DeepEqual(got, want) {
				t.Errorf("downstream of %s = %q, want %q", node, got, want)
			}
		}
	}
	// The bookworm branch of ruby is no longer followed.
	projects[1].Refs = nil
	if err := s.ApplyScan(ctx, projects, scan.Meta{StartedAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	p, err := s.Project(ctx, "lang/ruby")
	if err != nil || len(p.Refs) != 0 || len(p.Dependencies) != 1 {
		t.Errorf("ruby after its branch is dropped: %+v, %v", p, err)
	}
	if g, _ := s.Graph(ctx); g.Has("lang/ruby@bookworm") {
		t.Error("a dropped node is still in the graph")
	}
}
