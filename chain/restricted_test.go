package chain_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/store"
)

const inputsCI = "spec:\n  inputs:\n    depsd_action_id:\n      default: ''\n---\nbuild:\n  script: echo $[[ inputs.depsd_action_id ]]\n"

// A project that refuses pipeline variables (GitLab.com's default for new
// projects since 17.7) still gets its pipeline, once, and the chain goes on
// below it: with the depsd_action_id input where its CI configuration
// declares one, bare otherwise. The refusal is learned, once: the next
// chain asks the right way at once.
func TestChainThroughProjectRefusingVariables(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		ci         string
		noInputs   bool // a GitLab before 17.10
		wantIdent  chain.PipelineIdent
		firstPosts int // creates sent for app's first pipeline
	}{
		{"no input declared", "", false, chain.IdentNone, 3}, // variables refused, input refused, bare
		{"input declared", inputsCI, false, chain.IdentInputs, 2},
		{"GitLab before inputs", inputsCI, true, chain.IdentNone, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGitLabEnv(t, nil, "base>app", "app>leaf")
			g.engine.SetPipelineInputs(!tc.noInputs)
			if tc.ci != "" {
				if _, err := g.srv.SetFile("g/app", ".gitlab-ci.yml", tc.ci); err != nil {
					t.Fatal(err)
				}
			}
			if err := g.srv.SetCISettings("g/app", gitlabtest.RestrictedCISettings(gitlabtest.RoleDeveloper)); err != nil {
				t.Fatal(err)
			}
			for round := range 2 {
				id, err := g.engine.Rebuild(g.ctx, "g/base", chain.Reason{})
				if err != nil {
					t.Fatal(err)
				}
				g.send()
				g.end("g/base", "success")
				posts := g.srv.Requests("POST /projects/:id/pipeline")
				g.send()
				appPosts := g.srv.Requests("POST /projects/:id/pipeline") - posts
				if v := g.states(id); states(v) != "g/app=triggered g/base=success g/leaf=waiting" {
					t.Fatalf("round %d, after base: %s (app: %q)", round, states(v), member(v, "g/app").Why)
				}
				g.end("g/app", "success")
				g.send()
				g.end("g/leaf", "success")
				v := g.states(id)
				if v.State != chain.Finished || states(v) != "g/app=success g/base=success g/leaf=success" {
					t.Fatalf("round %d: chain = %s: %s", round, v.State, states(v))
				}
				ps := g.srv.Pipelines("g/app")
				if len(ps) != round+1 {
					t.Fatalf("round %d: %d app pipelines, want %d", round, len(ps), round+1)
				}
				last := ps[len(ps)-1]
				if len(last.Variables) != 0 {
					t.Errorf("app pipeline has variables %v", last.Variables)
				}
				got, _ := last.Inputs[chain.InputActionID].(string)
				if hasID := strings.HasPrefix(got, "a-"); hasID != (tc.wantIdent == chain.IdentInputs) || len(last.Inputs) > 1 {
					t.Errorf("app pipeline inputs = %v", last.Inputs)
				}
				want := 1
				if round == 0 {
					want = tc.firstPosts
				}
				if appPosts != int64(want) {
					t.Errorf("round %d: %d creates for app, want %d", round, appPosts, want)
				}
			}
			if p, err := g.store.Project(g.ctx, "g/app"); err != nil || p.PipelineIdent != string(tc.wantIdent) {
				t.Errorf("stored ident = %q, %v; want %q", p.PipelineIdent, err, tc.wantIdent)
			}
		})
	}
}

// setIdent stores how a project of g identifies its pipelines, as the
// engine learns it from a refusal.
func (g *glEnv) setIdent(project string, ident chain.PipelineIdent) {
	g.t.Helper()
	err := g.store.UpdateChains(g.ctx, func(tx chain.Tx) error {
		p, _, err := tx.Project(g.ctx, project)
		if err != nil {
			return err
		}
		return tx.SetPipelineIdent(g.ctx, p.ID, ident)
	})
	if err != nil {
		g.t.Fatal(err)
	}
}

// takeForOtherAction records pipelineID in the store as created by
// another action of project, sent and recorded.
func (g *glEnv) takeForOtherAction(project string, pipelineID int64) {
	g.t.Helper()
	info, _ := g.srv.Project(project)
	now := g.clock.Now()
	a := chain.Action{ID: fmt.Sprintf("a-other-%d", pipelineID), ChainID: 999, Project: project, ProjectID: info.ID, Ref: "main",
		State: chain.ActionSent, Attempts: 1, NextAttemptAt: now, PipelineID: pipelineID, CreatedAt: now, SentAt: now}
	if err := g.store.UpdateChains(g.ctx, func(tx chain.Tx) error { return tx.AddAction(g.ctx, a) }); err != nil {
		g.t.Fatal(err)
	}
}

// takeForChain records in the store a finished chain that took
// pipelineID's success: counted by its member project, or (started) as
// the reason the chain started.
func (g *glEnv) takeForChain(project string, pipelineID int64, started bool) {
	g.t.Helper()
	info, _ := g.srv.Project(project)
	now := g.clock.Now()
	err := g.store.UpdateChains(g.ctx, func(tx chain.Tx) error {
		id, err := tx.NewChainID(g.ctx)
		if err != nil {
			return err
		}
		c := &chain.Chain{ID: id, Mode: chain.Full, State: chain.Finished, Roots: []string{project},
			StartedAt: now, UpdatedAt: now, EndedAt: now}
		if started {
			c.Reasons = []chain.Reason{{Kind: chain.ReasonPipeline, Project: project, PipelineID: pipelineID, At: now}}
			c.Members = []*chain.Member{{Project: project + "-down", State: chain.Success, PipelineID: pipelineID + 100000}}
		} else {
			c.Members = []*chain.Member{{Project: project, ProjectID: info.ID, State: chain.Success, PipelineID: pipelineID}}
		}
		return tx.SaveChain(g.ctx, c)
	})
	if err != nil {
		g.t.Fatal(err)
	}
}

// A resend in a project without variables (a crash between GitLab's answer
// and its record) adopts the pipeline the first attempt created, found
// among the token's user's api pipelines on the ref created since the
// claim that no other action or chain took, and creates none more.
func TestResendAdoptsWithoutActionID(t *testing.T) {
	t.Parallel()
	const named = "spec:\n  inputs:\n    depsd_action_id:\n      default: ''\n---\nworkflow:\n  name: 'depsd $[[ inputs.depsd_action_id ]]'\nbuild:\n  script: make\n"
	// tokensBefore adds, before the crashed create, an api pipeline of the
	// token's user in status, which take then records as taken.
	tokensBefore := func(status string, take func(g *glEnv, id int64)) func(*testing.T, *glEnv, bool) []int64 {
		return func(t *testing.T, g *glEnv, before bool) []int64 {
			if !before {
				return nil
			}
			id, err := g.srv.AddPipelineAs("g/app", "main", "api", status, gitlabtest.TokenUsername)
			if err != nil {
				t.Fatal(err)
			}
			take(g, id)
			return []int64{id}
		}
	}
	pastTokens := func(t *testing.T, g *glEnv, before bool) []int64 {
		if !before {
			return nil
		}
		now := time.Now()
		id, err := g.srv.AddPastPipeline("g/app", "main", "api", "success", now.Add(-20*time.Minute), now.Add(-15*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return []int64{id}
	}
	for _, tc := range []struct {
		name  string
		ident chain.PipelineIdent
		ci    string
		// others adds pipelines around the crashed create; it returns
		// the ids that must not be adopted.
		others     func(t *testing.T, g *glEnv, before bool) []int64
		ignored    []string // pipeline list filters the GitLab ignores
		wantCreate bool     // the resend creates a second pipeline
	}{
		{name: "none: the only candidate", ident: chain.IdentNone},
		{name: "none: another user's api pipeline after the claim is not a candidate", ident: chain.IdentNone,
			others: func(t *testing.T, g *glEnv, before bool) []int64 {
				if !before {
					return nil
				}
				id, err := g.srv.AddPipelineAs("g/app", "main", "api", "running", "author")
				if err != nil {
					t.Fatal(err)
				}
				return []int64{id}
			}},
		{name: "none: the token's pipeline from before the claim is not a candidate", ident: chain.IdentNone,
			others: pastTokens},
		{name: "none: the token's pipeline from before the claim, on a GitLab that ignores created_after", ident: chain.IdentNone,
			others: pastTokens, ignored: []string{"created_after"}},
		{name: "none: the token's pipeline after the claim that another action recorded is not a candidate", ident: chain.IdentNone,
			others: tokensBefore("running", func(g *glEnv, id int64) { g.takeForOtherAction("g/app", id) })},
		{name: "none: the token's pipeline after the claim whose success a member counted is not a candidate", ident: chain.IdentNone,
			others: tokensBefore("success", func(g *glEnv, id int64) { g.takeForChain("g/app", id, false) })},
		{name: "none: the token's pipeline after the claim whose success started a chain is not a candidate", ident: chain.IdentNone,
			others: tokensBefore("success", func(g *glEnv, id int64) { g.takeForChain("g/app", id, true) })},
		{name: "inputs: adopted by the input in the pipeline's name, not the oldest", ident: chain.IdentInputs, ci: named,
			others: func(t *testing.T, g *glEnv, before bool) []int64 {
				if !before {
					return nil
				}
				// The token's own api pipeline, after the claim but
				// before depsd's: the oldest candidate.
				id, err := g.srv.AddPipelineAs("g/app", "main", "api", "running", gitlabtest.TokenUsername)
				if err != nil {
					t.Fatal(err)
				}
				return []int64{id}
			}},
		{name: "none: nothing was created: the resend creates", ident: chain.IdentNone, wantCreate: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGitLabEnv(t, nil, "app>leaf")
			if tc.ci != "" {
				if _, err := g.srv.SetFile("g/app", ".gitlab-ci.yml", tc.ci); err != nil {
					t.Fatal(err)
				}
			}
			if err := g.srv.SetCISettings("g/app", gitlabtest.RestrictedCISettings("")); err != nil {
				t.Fatal(err)
			}
			g.setIdent("g/app", tc.ident)
			g.srv.SetIgnoredPipelineFilters(tc.ignored...)
			id, err := g.engine.Rebuild(g.ctx, "g/app", chain.Reason{})
			if err != nil {
				t.Fatal(err)
			}
			var notOurs []int64
			var created int64
			crashCtx, crash := context.WithCancel(g.ctx)
			chain.SetSendHook(g.engine, func(a chain.Action) {
				if tc.others != nil {
					notOurs = append(notOurs, tc.others(t, g, true)...)
				}
				if !tc.wantCreate {
					// The request reaches GitLab; then the process dies.
					p, err := g.client.CreatePipeline(senderCtx(g.ctx), a.ProjectID, a.Ref, chain.CreateOptionsOf(a))
					if err != nil {
						t.Error(err)
					}
					created = p.ID
				}
				if tc.others != nil {
					notOurs = append(notOurs, tc.others(t, g, false)...)
				}
				crash()
			})
			if _, err := g.engine.SendPending(crashCtx); err == nil {
				t.Fatal("SendPending survived the crash")
			}
			before := len(g.srv.Pipelines("g/app"))
			s2, err := store.Open(g.ctx, g.path)
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			g.engine = g.newEngine(s2)
			g.clock.Advance(6 * time.Minute) // the dead worker's lease
			if n := g.send(); n != 1 {
				t.Fatalf("sent %d after restart, want 1", n)
			}
			ps := g.srv.Pipelines("g/app")
			wantAfter := before
			if tc.wantCreate {
				wantAfter++
			}
			if len(ps) != wantAfter {
				t.Fatalf("%d pipelines of app after the resend, want %d", len(ps), wantAfter)
			}
			m := member(g.states(id), "g/app")
			if m.State != chain.Triggered || slices.Contains(notOurs, m.PipelineID) || (!tc.wantCreate && m.PipelineID != created) {
				t.Errorf("app = %+v; created %d, not ours %v", m, created, notOurs)
			}
		})
	}
}

// crashThenResend sends the due actions with during called for each (it
// may create the pipeline, as the request that reached GitLab would, or
// add others), crashing after the first; then it opens the store again
// with a new engine, lets the dead worker's lease run out and sends once
// more, returning how many that sent.
func (g *glEnv) crashThenResend(during func(a chain.Action)) int {
	g.t.Helper()
	crashCtx, crash := context.WithCancel(g.ctx)
	chain.SetSendHook(g.engine, func(a chain.Action) {
		during(a)
		crash()
	})
	if _, err := g.engine.SendPending(crashCtx); err == nil {
		g.t.Fatal("SendPending survived the crash")
	}
	g.restart()
	g.clock.Advance(6 * time.Minute) // the dead worker's lease
	return g.send()
}

// restart opens the store again and starts a new engine on it, as the
// next process would.
func (g *glEnv) restart() {
	g.t.Helper()
	s2, err := store.Open(g.ctx, g.path)
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { s2.Close() })
	g.store, g.engine = s2, g.newEngine(s2)
}

// A resend in a project that takes variables adopts only a pipeline of the
// token's user carrying the action's id: a developer's api pipeline with
// the id copied into its variables, created while the first attempt
// crashed before its create, is not depsd's build, and the resend creates
// one.
func TestResendAdoptsOnlyTheTokensPipeline(t *testing.T) {
	t.Parallel()
	g := newGitLabEnv(t, nil, "app>leaf")
	id, err := g.engine.Rebuild(g.ctx, "g/app", chain.Reason{})
	if err != nil {
		t.Fatal(err)
	}
	var copied int64
	n := g.crashThenResend(func(a chain.Action) {
		copied, err = g.srv.AddAPIPipelineAs("g/app", "main", "running", "author", map[string]string{chain.VarActionID: a.ID})
		if err != nil {
			t.Error(err)
		}
	})
	if n != 1 {
		t.Fatalf("sent %d after restart, want 1", n)
	}
	if ps := g.srv.Pipelines("g/app"); len(ps) != 2 {
		t.Fatalf("%d pipelines of app, want the developer's and depsd's", len(ps))
	}
	if m := member(g.states(id), "g/app"); m.State != chain.Triggered || m.PipelineID == copied {
		t.Errorf("app = %+v; the developer's pipeline %d was adopted", m, copied)
	}
}

// A resend in a project that takes variables reads the variables of the
// token's api pipelines created since shortly before the action
// (Config.AdoptWindow) only: one created before, still running or just
// finished, is no earlier attempt's, and costs no request, also on a GitLab
// that ignores the list's time filters.
func TestResendSkipsPipelinesFromBeforeTheAction(t *testing.T) {
	t.Parallel()
	for _, ignored := range [][]string{nil, {"updated_after", "created_after"}} {
		t.Run(fmt.Sprintf("ignored %v", ignored), func(t *testing.T) {
			g := newGitLabEnv(t, nil, "app>leaf")
			g.srv.SetIgnoredPipelineFilters(ignored...)
			now := time.Now()
			old, err := g.srv.AddPastPipeline("g/app", "main", "api", "success", now.Add(-20*time.Minute), now.Add(-time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := g.engine.Rebuild(g.ctx, "g/app", chain.Reason{}); err != nil {
				t.Fatal(err)
			}
			const variables = "GET /projects/:id/pipelines/:pipeline_id/variables"
			n := g.crashThenResend(func(chain.Action) {})
			if n != 1 {
				t.Fatalf("sent %d after restart, want 1", n)
			}
			if got := g.srv.Requests(variables); got != 0 {
				t.Errorf("the resend read the variables of %d pipelines, want none (pipeline %d is from before the action)", got, old)
			}
			if ps := g.srv.Pipelines("g/app"); len(ps) != 2 {
				t.Fatalf("%d pipelines of app, want the old one and depsd's", len(ps))
			}
		})
	}
}

// Two actions of one project and ref whose creates both reached GitLab
// before their records were lost (first-level rebuilds of app, one after
// the other), in a project whose pipelines carry no action id: each resend
// adopts its own pipeline and none is created again. The resend of the
// action claimed first adopts the oldest free candidate: GitLab lists
// newest first, and the newer pipeline is the only one the later action
// can adopt (the older was created before its claim), so taking the
// newest would leave the later action none and build app a third time.
func TestResendsOfTwoActionsAdoptTheirOwn(t *testing.T) {
	t.Parallel()
	g := newGitLabEnvWith(t, glOptions{sharedClock: true, cfg: chain.Config{Mode: chain.FirstLevel, SendConcurrency: 1}}, "app>leaf")
	if err := g.srv.SetCISettings("g/app", gitlabtest.RestrictedCISettings("")); err != nil {
		t.Fatal(err)
	}
	g.setIdent("g/app", chain.IdentNone)
	created := map[string]int64{} // action id: its pipeline
	create := func(a chain.Action) {
		if a.Attempts > 1 {
			return // a resend: it looks first
		}
		p, err := g.client.CreatePipeline(senderCtx(g.ctx), a.ProjectID, a.Ref, chain.CreateOptionsOf(a))
		if err != nil {
			t.Error(err)
		}
		created[a.ID] = p.ID
	}
	first, err := g.engine.Rebuild(g.ctx, "g/app", chain.Reason{})
	if err != nil {
		t.Fatal(err)
	}
	crashCtx, crash := context.WithCancel(g.ctx)
	chain.SetSendHook(g.engine, func(a chain.Action) { create(a); crash() })
	if _, err := g.engine.SendPending(crashCtx); err == nil {
		t.Fatal("SendPending survived the crash")
	}
	// The next process, two minutes later: the second rebuild's create
	// reaches GitLab too, and that process dies as well.
	g.clock.Advance(2 * time.Minute)
	g.restart()
	second, err := g.engine.Rebuild(g.ctx, "g/app", chain.Reason{})
	if err != nil {
		t.Fatal(err)
	}
	if n := g.crashThenResend(create); n != 2 {
		t.Fatalf("sent %d after the second restart, want both actions", n)
	}
	if len(created) != 2 {
		t.Fatalf("test setup: %d creates reached GitLab, want 2", len(created))
	}
	if ps := g.srv.Pipelines("g/app"); len(ps) != 2 {
		t.Errorf("%d pipelines of app, want the two the crashed sends created", len(ps))
	}
	got := map[int64]bool{}
	for _, id := range []int64{first, second} {
		m := member(g.states(id), "g/app")
		if m.State != chain.Triggered || got[m.PipelineID] {
			t.Errorf("chain %d: app = %s with pipeline %d (created: %v)", id, m.State, m.PipelineID, created)
		}
		got[m.PipelineID] = true
	}
}

// The success of the pipeline a crashed send created, reported before the
// resend adopted it, starts no chain of its own: the resend adopts the
// pipeline and counts its success, once.
func TestUnrecordedSuccessWaitsForTheResend(t *testing.T) {
	t.Parallel()
	g := newGitLabEnv(t, nil, "app>leaf")
	if err := g.srv.SetCISettings("g/app", gitlabtest.RestrictedCISettings("")); err != nil {
		t.Fatal(err)
	}
	g.setIdent("g/app", chain.IdentNone)
	id, err := g.engine.Rebuild(g.ctx, "g/app", chain.Reason{})
	if err != nil {
		t.Fatal(err)
	}
	crashCtx, crash := context.WithCancel(g.ctx)
	chain.SetSendHook(g.engine, func(a chain.Action) {
		if _, err := g.client.CreatePipeline(senderCtx(g.ctx), a.ProjectID, a.Ref, chain.CreateOptionsOf(a)); err != nil {
			t.Error(err)
		}
		crash()
	})
	if _, err := g.engine.SendPending(crashCtx); err == nil {
		t.Fatal("SendPending survived the crash")
	}
	s2, err := store.Open(g.ctx, g.path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	g.engine = g.newEngine(s2)
	g.end("g/app", "success") // its webhook, before the resend
	g.clock.Advance(6 * time.Minute)
	if n := g.send(); n != 1 {
		t.Fatalf("sent %d after restart, want 1 (adopted)", n)
	}
	// The adopted pipeline's status came with it: app succeeded.
	g.send()
	if v := g.states(id); states(v) != "g/app=success g/leaf=triggered" {
		t.Errorf("chain: %s", states(v))
	}
	if cs, err := g.engine.Chains(g.ctx, chain.Filter{}); err != nil || len(cs) != 1 {
		t.Errorf("%d chains, want 1 (%v)", len(cs), err)
	}
	if ps := g.srv.Pipelines("g/leaf"); len(ps) != 1 {
		t.Errorf("%d leaf pipelines, want 1", len(ps))
	}
	if n := len(g.srv.Pipelines("g/app")); n != 1 {
		t.Errorf("%d app pipelines, want 1", n)
	}
}

// A rebuild without cache in a project that takes inputs, not variables,
// asks for it with the depsd_no_cache input where the CI configuration
// declares it, and without it (one refusal more, nothing learned) where
// only depsd_action_id is declared.
func TestNoCacheInputWhereDeclared(t *testing.T) {
	t.Parallel()
	const both = "spec:\n  inputs:\n    depsd_action_id:\n      default: ''\n    depsd_no_cache:\n      type: boolean\n      default: false\n---\nbuild:\n  script: echo $[[ inputs.depsd_no_cache ]]\n"
	for _, tc := range []struct {
		name      string
		ci        string
		wantInput map[string]any // the pipeline's inputs but the action id
		wantPosts int64
	}{
		{"declared", both, map[string]any{chain.InputNoCache: "true"}, 1},
		{"only the action id declared", inputsCI, map[string]any{}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGitLabEnv(t, nil, "base>app")
			if _, err := g.srv.SetFile("g/app", ".gitlab-ci.yml", tc.ci); err != nil {
				t.Fatal(err)
			}
			if err := g.srv.SetCISettings("g/app", gitlabtest.RestrictedCISettings(gitlabtest.RoleDeveloper)); err != nil {
				t.Fatal(err)
			}
			info, _ := g.srv.Project("g/app")
			a := chain.Action{ID: "a-nocache", ChainID: 1, Project: "g/app", ProjectID: info.ID, Ref: "main",
				Ident: chain.IdentInputs, NoCache: true}
			before := g.srv.Requests("POST /projects/:id/pipeline")
			if _, err := g.engine.CreatePipelineOf(g.ctx, a); err != nil {
				t.Fatal(err)
			}
			if n := g.srv.Requests("POST /projects/:id/pipeline") - before; n != tc.wantPosts {
				t.Errorf("%d creates, want %d", n, tc.wantPosts)
			}
			ps := g.srv.Pipelines("g/app")
			got := ps[len(ps)-1].Inputs
			if got[chain.InputActionID] != "a-nocache" {
				t.Errorf("inputs %v lack the action id", got)
			}
			delete(got, chain.InputActionID)
			if len(got) != len(tc.wantInput) || (len(got) > 0 && got[chain.InputNoCache] != tc.wantInput[chain.InputNoCache]) {
				t.Errorf("inputs besides the action id = %v, want %v", got, tc.wantInput)
			}
			if p, err := g.store.Project(g.ctx, "g/app"); err != nil || p.PipelineIdent == string(chain.IdentNone) {
				t.Errorf("a refused depsd_no_cache taught the project %q (%v): it still takes the action id", p.PipelineIdent, err)
			}
		})
	}
}
