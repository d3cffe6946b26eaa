package chain_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/store"
)

// TestChainRidesThroughPipelineCreationThrottle runs a chain base → app
// against the fake GitLab with gitlab.com's pipeline creation rate limit
// (25 a minute per project, commit and user) already used up for app: the
// create answers 400 "Too many pipelines created in the last minute", the
// member waits and is retried with backoff, and app is built exactly once
// when the minute has passed. If the 400 were taken as permanent (like
// "Reference not found") app would fail and the chain would stop.
func TestChainRidesThroughPipelineCreationThrottle(t *testing.T) {
	clk := &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	srv := gitlabtest.New(gitlabtest.Options{Now: clk.Now,
		PipelineCreationLimit: gitlabtest.PipelineCreationLimit{PerProjectCommitUser: 25}})
	t.Cleanup(srv.Close)
	client, err := gitlab.New(gitlab.Config{BaseURL: srv.URL, Token: srv.Token, RequestsPerMinute: -1, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "depsd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ids := map[string]int64{}
	var projects []scan.Project
	for _, path := range []string{"g/base", "g/app"} {
		id, err := srv.AddProject(gitlabtest.Project{Path: path, Files: map[string]string{"README": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		ids[path] = id
		p := scan.Project{ID: id, Path: path, DefaultBranch: "main"}
		if path == "g/app" {
			p.Dependencies = []deps.Dependency{{Kind: deps.KindGitLabDeps, Ref: "g/base", Project: "g/base"}}
		}
		projects = append(projects, p)
	}
	if err := s.ApplyScan(t.Context(), projects, scan.Meta{StartedAt: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	en, err := chain.New(chain.Config{Store: s, GitLab: client, Graph: s.Graph, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	send := func() int {
		t.Helper()
		n, err := en.SendPending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	finish := func(path string) {
		t.Helper()
		ps := srv.Pipelines(path)
		p := ps[len(ps)-1]
		if err := srv.SetPipelineStatus(p.ID, "success"); err != nil {
			t.Fatal(err)
		}
		ev := chain.PipelineEvent{ProjectID: p.ProjectID, Project: path, PipelineID: p.ID, Status: "success",
			Ref: p.Ref, Source: p.Source, Variables: p.Variables}
		if _, err := en.RecordEvent(ctx, "done-"+path, chain.Event{Pipeline: &ev}); err != nil {
			t.Fatal(err)
		}
		if _, err := en.ProcessInbox(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Someone else used up app's creations of this minute.
	for range 25 {
		if _, err := client.CreatePipeline(ctx, ids["g/app"], "main", gitlab.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	id, err := en.Rebuild(ctx, "g/base", chain.Reason{Kind: chain.ReasonRebuild})
	if err != nil {
		t.Fatal(err)
	}
	if n := send(); n != 1 {
		t.Fatalf("sent %d for base, want 1", n)
	}
	finish("g/base")
	if n := send(); n != 0 {
		t.Fatalf("sent %d through the throttle", n)
	}
	v, err := en.Chain(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if m := member(v, "g/app"); m.State != chain.Pending || !strings.Contains(m.Why, "Too many pipelines") {
		t.Fatalf("throttled app = %s (%q), want pending and retrying", m.State, m.Why)
	}
	// Let the outbox's backoff run on the shared clock until app is sent.
	sent := 0
	for range 20 {
		clk.Advance(10 * time.Second)
		if sent = send(); sent > 0 {
			break
		}
	}
	if sent != 1 {
		t.Fatalf("app was not created after the throttle's minute")
	}
	finish("g/app")
	v, err = en.Chain(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if v.State != chain.Finished || states(v) != "g/app=success g/base=success" {
		t.Fatalf("chain %s: %s", v.State, states(v))
	}
	chainPipelines := 0
	for _, p := range srv.Pipelines("g/app") {
		if p.Variables[chain.VarChainID] != "" {
			chainPipelines++
		}
	}
	if chainPipelines != 1 {
		t.Errorf("%d pipelines of app created by the chain, want exactly 1", chainPipelines)
	}
}
