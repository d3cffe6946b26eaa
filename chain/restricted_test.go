package chain_test

import (
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
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
		wantIdent  chain.PipelineIdent
		firstPosts int // creates sent for app's first pipeline
	}{
		{"no input declared", "", chain.IdentNone, 3}, // variables refused, input refused, bare
		{"input declared", inputsCI, chain.IdentInputs, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGitLabEnv(t, nil, "base>app", "app>leaf")
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
