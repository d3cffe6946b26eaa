package chain_test

import (
	"testing"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/store/storetest"
)

// fleetRules: infra/base is released by tags and kept on a maintenance
// branch; lang/ruby has the same branch (docs/design/nodes.md).
var fleetRules = deps.RefRules{{Projects: []string{"infra/base", "lang/ruby"}, Branches: []string{"bookworm"}, Tags: "v*"}}

// newFleet stores the fleet of issue 36: base@tags → ruby → shop, and
// base@bookworm → ruby@bookworm, and returns an env whose engine follows
// those refs (rebuild is what a rebuild of base's releases runs on).
func newFleet(t *testing.T, rebuild deps.RebuildMode) *env {
	t.Helper()
	s, err := store.Open(t.Context(), storetest.State(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	e := &env{t: t, ctx: t.Context(), store: s, clock: &clock{t: t0},
		ids: map[string]int64{"infra/base": 1, "lang/ruby": 2, "apps/shop": 3}}
	e.gl = &fakeGitLab{now: e.clock.Now}
	// dep names the upstream node up (.gitlab-deps may name a node).
	dep := func(up string) []deps.Dependency {
		d := deps.Dependency{Kind: deps.KindGitLabDeps, Ref: up, Project: deps.NodeProject(up)}
		if d.Project != up {
			d.Node = up
		}
		return []deps.Dependency{d}
	}
	projects := []scan.Project{
		{ID: 1, Path: "infra/base", DefaultBranch: "main", Refs: []scan.Ref{
			{Node: "infra/base@bookworm", Kind: deps.NodeBranch, Ref: "bookworm"},
			{Node: "infra/base@tags", Kind: deps.NodeTags, Ref: "v3.2.1"}}},
		{ID: 2, Path: "lang/ruby", DefaultBranch: "main", Dependencies: dep("infra/base@tags"), Refs: []scan.Ref{
			{Node: "lang/ruby@bookworm", Kind: deps.NodeBranch, Ref: "bookworm", Dependencies: dep("infra/base@bookworm")}}},
		{ID: 3, Path: "apps/shop", DefaultBranch: "main", Dependencies: dep("lang/ruby")},
	}
	if err := s.ApplyScan(e.ctx, projects, scan.Meta{StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	rules := append(deps.RefRules(nil), fleetRules...)
	rules[0].Rebuild = rebuild
	e.engine, err = chain.New(chain.Config{Store: s, GitLab: e.gl, Graph: s.Graph, Mode: chain.Full, Now: e.clock.Now, Refs: rules})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// finishNode ends the newest pipeline depsd created for node's project
// with status, by webhook, on the ref it was created on.
func (e *env) finishNode(node, status string, tag bool) {
	e.t.Helper()
	p := e.latest(deps.NodeProject(node))
	e.gl.setStatus(p.ID, status)
	e.deliver(chain.PipelineEvent{ProjectID: p.ProjectID, Project: deps.NodeProject(node), PipelineID: p.ID, Status: status,
		Ref: p.Ref, Tag: tag, Source: "api", Variables: p.vars, URL: p.WebURL, At: e.clock.Now()})
}

// TestChainsOnReleaseTagsAndMaintenanceBranches: a release tag's pipeline
// starts a chain of the images the releases publish, a maintenance
// branch's starts one of its own, each downstream node is built on its
// own ref, and pipelines of refs no node follows start nothing.
func TestChainsOnReleaseTagsAndMaintenanceBranches(t *testing.T) {
	e := newFleet(t, "")
	push := func(ref string, tag bool, id int64) {
		e.deliver(chain.PipelineEvent{ProjectID: 1, Project: "infra/base", PipelineID: id, Status: "success",
			Ref: ref, Tag: tag, Source: "push", At: e.clock.Now()})
	}
	// Not followed: a feature branch, a tag that is no release, main (its
	// pipelines only test: nothing is downstream of base's main).
	push("feature/x", false, 90)
	push("nightly", true, 91)
	push("main", false, 92)
	if n := e.send(); n != 0 {
		t.Fatalf("%d pipelines created for refs nothing follows", n)
	}

	// The release v3.2.1 (the one the scan read) succeeds.
	push("v3.2.1", true, 100)
	if n := e.send(); n != 1 {
		t.Fatalf("release: %d pipelines created, want ruby's", n)
	}
	if p := e.latest("lang/ruby"); p.Ref != "main" {
		t.Errorf("ruby (FROM base:3) built on %s, want main", p.Ref)
	}
	e.finishNode("lang/ruby", "success", false)
	e.send()
	if p := e.latest("apps/shop"); p.Ref != "main" {
		t.Errorf("shop built on %s, want main", p.Ref)
	}
	e.finishNode("apps/shop", "success", false)

	// A fix on base's bookworm branch: ruby's bookworm branch is rebuilt,
	// and nothing of main.
	push("bookworm", false, 200)
	if n := e.send(); n != 1 {
		t.Fatalf("bookworm: %d pipelines created, want ruby@bookworm's", n)
	}
	p := e.latest("lang/ruby")
	if p.Ref != "bookworm" {
		t.Errorf("ruby@bookworm built on %s, want bookworm", p.Ref)
	}
	if p.vars[chain.VarUpstream] != "infra/base@bookworm" {
		t.Errorf("DEPSD_UPSTREAM = %q, want infra/base@bookworm", p.vars[chain.VarUpstream])
	}
	e.finishNode("lang/ruby@bookworm", "success", false)
	e.send()
	e.wantCounts(map[string]int{"lang/ruby": 2, "apps/shop": 1})
}

// TestRebuildOfReleases: a rebuild of a project's releases runs a new
// pipeline on its newest release tag (rebuild: latest-tag, the default),
// or on its default branch (rebuild: branch).
func TestRebuildOfReleases(t *testing.T) {
	for mode, want := range map[deps.RebuildMode]string{"": "v3.2.1", deps.RebuildBranch: "main"} {
		e := newFleet(t, mode)
		e.rebuild("infra/base@tags")
		if e.send() < 1 {
			t.Fatalf("rebuild %q: nothing sent", mode)
		}
		if p := e.latest("infra/base"); p.Ref != want {
			t.Errorf("rebuild %q of infra/base@tags created a pipeline on %s, want %s", mode, p.Ref, want)
		}
		// Its success (a tag pipeline, or the default branch's) moves the
		// chain on: ruby is built next.
		e.finishNode("infra/base@tags", "success", want != "main")
		e.send()
		if e.count("lang/ruby") != 1 {
			t.Errorf("rebuild %q: ruby not built after base's success", mode)
		}
	}
}
