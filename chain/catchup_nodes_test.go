package chain_test

import (
	"slices"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/store/storetest"
)

// TestCatchUpOfFollowedRefs: the catch-up finds the successes of a
// project's followed refs whose webhooks never came (a release tag's, a
// maintenance branch's; not a feature branch's), and a project that
// starts to be followed at other refs (refs: added, an upgrade from before
// nodes) has its earlier successes of those refs noted, never rebuilt.
func TestCatchUpOfFollowedRefs(t *testing.T) {
	srv := gitlabtest.New(gitlabtest.Options{})
	t.Cleanup(srv.Close)
	ids := map[string]int64{}
	for _, p := range []string{"g/base", "g/ruby"} {
		id, err := srv.AddProject(gitlabtest.Project{Path: p, Files: map[string]string{"README": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		ids[p] = id
		if err := srv.CreateBranch(p, "bookworm"); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.CreateBranch("g/base", "feature"); err != nil {
		t.Fatal(err)
	}
	if err := srv.CreateTag("g/base", "v3.2.1", "main"); err != nil {
		t.Fatal(err)
	}
	client, err := gitlab.New(gitlab.Config{BaseURL: srv.URL, Token: srv.Token, RequestsPerMinute: -1, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(t.Context(), storetest.State(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	on := func(up string) []deps.Dependency {
		d := deps.Dependency{Kind: deps.KindGitLabDeps, Ref: up, Project: deps.NodeProject(up)}
		if d.Project != up {
			d.Node = up
		}
		return []deps.Dependency{d}
	}
	apply := func(projects []scan.Project, at time.Time) {
		t.Helper()
		if err := s.ApplyScan(t.Context(), projects, scan.Meta{StartedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	rules := deps.RefRules{{Projects: []string{"g/base", "g/ruby"}, Branches: []string{"bookworm"}, Tags: "v*"}}
	engine, err := chain.New(chain.Config{Store: s, GitLab: client, Graph: s.Graph, Mode: chain.Full, Refs: rules})
	if err != nil {
		t.Fatal(err)
	}
	catchUp := func() chain.CatchUpResult {
		t.Helper()
		res, err := engine.CatchUp(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	success := func(ref string) {
		t.Helper()
		if _, err := srv.AddPipeline("g/base", ref, "push", "success"); err != nil {
			t.Fatal(err)
		}
	}

	// Before nodes: base's default branch is followed alone.
	apply([]scan.Project{{ID: ids["g/base"], Path: "g/base", DefaultBranch: "main"},
		{ID: ids["g/ruby"], Path: "g/ruby", DefaultBranch: "main", Dependencies: on("g/base")}}, time.Now())
	catchUp() // notes where base stands
	// While the old depsd ran: successes of refs it did not follow.
	success("bookworm")
	success("v3.2.1")
	time.Sleep(1100 * time.Millisecond) // GitLab filters by whole seconds

	// The upgrade: base's release tags and bookworm are nodes now.
	apply([]scan.Project{
		{ID: ids["g/base"], Path: "g/base", DefaultBranch: "main", Refs: []scan.Ref{
			{Node: "g/base@bookworm", Kind: deps.NodeBranch, Ref: "bookworm"},
			{Node: "g/base@tags", Kind: deps.NodeTags, Ref: "v3.2.1"}}},
		{ID: ids["g/ruby"], Path: "g/ruby", DefaultBranch: "main", Dependencies: on("g/base@tags"), Refs: []scan.Ref{
			{Node: "g/ruby@bookworm", Kind: deps.NodeBranch, Ref: "bookworm", Dependencies: on("g/base@bookworm")}}},
	}, time.Now().Add(time.Minute))
	if res := catchUp(); res.Applied != 0 {
		t.Fatalf("the upgrade rebuilt what succeeded before it: %+v", res)
	}
	if n, _ := engine.SendPending(t.Context()); n != 0 || len(srv.Pipelines("g/ruby")) != 0 {
		t.Fatalf("the upgrade created %d pipelines", n)
	}

	// Missed webhooks: a release, a maintenance fix, a feature branch.
	time.Sleep(1100 * time.Millisecond)
	success("feature")
	success("v3.2.1")
	success("bookworm")
	if res := catchUp(); res.Applied != 2 {
		t.Fatalf("catch-up applied %+v, want the release's and bookworm's successes", res)
	}
	if _, err := engine.SendPending(t.Context()); err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, p := range srv.Pipelines("g/ruby") {
		refs = append(refs, p.Ref)
	}
	slices.Sort(refs)
	if !slices.Equal(refs, []string{"bookworm", "main"}) {
		t.Errorf("ruby built on %q, want main (after base's release) and bookworm", refs)
	}
}
