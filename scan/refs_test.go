package scan_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/scan"
)

// TestScanReadsFollowedRefs: a project a refs rule matches is read at
// every followed branch and at its newest release tag (by version, not a
// pre-release, not another tag), each a node of the graph with its own
// dependencies; the requests it costs are counted apart; an unchanged
// rescan reads none of them again, and a rule that changes reads them
// again.
func TestScanReadsFollowedRefs(t *testing.T) {
	const reg = "registry.example.com/"
	c := newClocked(t,
		gitlabtest.Project{Path: "g/base", Files: map[string]string{"Containerfile": "FROM debian:trixie\n"}},
		gitlabtest.Project{Path: "g/ruby", Files: map[string]string{"Containerfile": "FROM " + reg + "g/base:3\n"}},
		gitlabtest.Project{Path: "g/app", Files: map[string]string{"Containerfile": "FROM " + reg + "g/ruby:latest\n"}})
	srv := c.srv
	for _, b := range []string{"bookworm", "feature/x"} {
		if err := srv.CreateBranch("g/base", b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := srv.SetFileOn("g/base", "bookworm", "Containerfile", "FROM debian:bookworm\n"); err != nil {
		t.Fatal(err)
	}
	if err := srv.CreateBranch("g/ruby", "bookworm"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.SetFileOn("g/ruby", "bookworm", "Containerfile", "FROM "+reg+"g/base:bookworm\n"); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"v3.2.1", "v3.10.0-rc.1", "v3.9.0", "nightly"} {
		if err := srv.CreateTag("g/base", tag, "main"); err != nil {
			t.Fatal(err)
		}
	}
	c.opts.Refs = deps.RefRules{{Projects: []string{"g/base", "g/ruby"}, Branches: []string{"bookworm"}, Tags: "v*"}}
	// Pushes older than GitLab's hour of last_activity_at: a later scan
	// can tell nothing moved.
	c.now = c.now.Add(2 * time.Hour)
	ctx := context.Background()
	res, err := scan.Run(ctx, c.gl, c.st, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	// base: branches, tags, two trees; ruby: branches, tags, a tree.
	if res.RefRequests != 7 {
		t.Errorf("ref requests %d, want 7 (a branch and a tag listing each, a tree per ref)", res.RefRequests)
	}
	base, err := c.st.Project(ctx, "g/base")
	if err != nil {
		t.Fatal(err)
	}
	if len(base.Refs) != 2 || base.Refs[0].Node != "g/base@bookworm" || base.Refs[1].Node != "g/base@tags" || base.Refs[1].Ref != "v3.9.0" {
		t.Fatalf("base's refs %+v: want bookworm and the release v3.9.0", base.Refs)
	}
	if b := base.Refs[0]; len(b.Dependencies) != 1 || b.Dependencies[0].Image != "docker.io/library/debian:bookworm" {
		t.Errorf("base@bookworm's dependencies %+v: want its own branch's", b.Dependencies)
	}
	g, err := c.st.Graph(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string][]string{
		"g/base@tags":     {"g/ruby"},
		"g/base@bookworm": {"g/ruby@bookworm"},
		"g/ruby":          {"g/app"},
		"g/base":          nil,
	} {
		if got := g.Downstream(node); !slices.Equal(got, want) {
			t.Errorf("downstream of %s = %q, want %q", node, got, want)
		}
	}

	// Nothing moved: nothing is read again.
	c.now = c.now.Add(time.Minute)
	again, err := scan.Run(ctx, c.gl, c.st, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	if again.RefRequests != 0 || again.Requests != 1 {
		t.Errorf("unchanged rescan: %d requests, %d for refs; want 1 (the listing) and none", again.Requests, again.RefRequests)
	}
	// Another rule: ruby no longer follows bookworm.
	c.opts.Refs = deps.RefRules{{Projects: []string{"g/base"}, Branches: []string{"bookworm"}, Tags: "v*"}}
	c.now = c.now.Add(time.Minute)
	if _, err := scan.Run(ctx, c.gl, c.st, c.opts); err != nil {
		t.Fatal(err)
	}
	if ruby, _ := c.st.Project(ctx, "g/ruby"); len(ruby.Refs) != 0 {
		t.Errorf("ruby's refs after its rule went: %+v", ruby.Refs)
	}
	if g, _ := c.st.Graph(ctx); g.Has("g/ruby@bookworm") {
		t.Error("g/ruby@bookworm is still a node")
	}
}
