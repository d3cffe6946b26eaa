package chain_test

import (
	"testing"

	"gitlab.com/depsd/depsd/chain"
)

// A success whose webhook never arrived is caught by the next catch-up
// round, once: later rounds, and a success already handled by its
// webhook, start nothing. Each round costs one request per project with
// something downstream.
func TestCatchUpAppliesAMissedSuccessOnce(t *testing.T) {
	g := newGitLabEnv(t, nil, "base>a", "a>b")
	catchUp := func() chain.CatchUpResult {
		t.Helper()
		res, err := g.engine.CatchUp(g.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	chains := func() int {
		t.Helper()
		cs, err := g.engine.Chains(g.ctx, chain.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		return len(cs)
	}
	// The first round only notes where to start: history before depsd
	// looked is not replayed.
	if _, err := g.srv.AddPipeline("g/base", "main", "push", "success"); err != nil {
		t.Fatal(err)
	}
	if res := catchUp(); res.Projects != 2 || res.Applied != 0 || chains() != 0 {
		t.Fatalf("first round: %+v", res)
	}
	// A success nobody told depsd about.
	if _, err := g.srv.AddPipeline("g/base", "main", "push", "success"); err != nil {
		t.Fatal(err)
	}
	g.srv.ResetRequests()
	res := catchUp()
	if res.Applied != 1 || chains() != 1 {
		t.Fatalf("missed success: %+v, %d chains", res, chains())
	}
	if n := g.srv.Requests("GET /projects/:id/pipelines"); n != 2 { // base and a have downstream, b not
		t.Errorf("round made %d pipeline list requests, want 2", n)
	}
	// Again: nothing new.
	if res := catchUp(); res.Applied != 0 || chains() != 1 {
		t.Fatalf("second round acted again: %+v, %d chains", res, chains())
	}
	// A success handled by its webhook is not redone by the catch-up.
	id, err := g.srv.AddPipeline("g/a", "main", "push", "success")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.engine.ApplyPipelineEvent(g.ctx, chain.PipelineEvent{ProjectID: projectID(t, g, "g/a"), Project: "g/a",
		PipelineID: id, Status: "success", Ref: "main", Source: "push"}); err != nil {
		t.Fatal(err)
	}
	before := chains()
	if res := catchUp(); res.Applied != 0 || chains() != before {
		t.Fatalf("catch-up redid a handled success: %+v, %d chains (was %d)", res, chains(), before)
	}
}

func projectID(t *testing.T, g *glEnv, path string) int64 {
	t.Helper()
	p, ok := g.srv.Project(path)
	if !ok {
		t.Fatalf("no project %s", path)
	}
	return p.ID
}

// A project with more pipelines updated since the last round than one page
// holds: the catch-up reads the oldest first, so the missed success among
// them is still found.
func TestCatchUpReadsABusyProjectOldestFirst(t *testing.T) {
	g := newGitLabEnv(t, nil, "base>a")
	if _, err := g.engine.CatchUp(g.ctx); err != nil { // notes where to start
		t.Fatal(err)
	}
	if _, err := g.srv.AddPipeline("g/base", "main", "push", "success"); err != nil {
		t.Fatal(err)
	}
	for range 120 {
		if _, err := g.srv.AddPipeline("g/base", "main", "push", "failed"); err != nil {
			t.Fatal(err)
		}
	}
	res, err := g.engine.CatchUp(g.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied != 1 {
		t.Fatalf("the success under 120 newer pipelines was not caught up: %+v", res)
	}
}
