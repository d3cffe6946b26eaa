package visible_test

import (
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/verify"
	"gitlab.com/depsd/depsd/visible"
)

func scope() *visible.Scope {
	return visible.For(visible.Set([]string{"g/app", "g/base", "g/base-extra"}),
		visible.Set([]string{"g/app", "g/base", "g/base-extra", "h/secret", "g/bas"}))
}

// TestTextTakesOutHiddenPaths: a hidden path goes, whole or as an image
// repository, and a visible path that contains one is left alone.
func TestTextTakesOutHiddenPaths(t *testing.T) {
	s := scope()
	for in, want := range map[string]string{
		"blocked: h/secret failed (pipeline 12)":      "blocked: (hidden) failed (pipeline 12)",
		"waiting for g/base, h/secret":                "waiting for g/base, (hidden)",
		"registry.example.com/h/secret:latest is old": "registry.example.com/(hidden):latest is old",
		"h/secret@bookworm":                           "(hidden)@bookworm",
		"g/base-extra and g/bas":                      "g/base-extra and (hidden)",
		"h/secretive is not a project":                "h/secretive is not a project",
		"nothing":                                     "nothing",
	} {
		if got := s.Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
	if got := visible.All().Text("h/secret"); got != "h/secret" {
		t.Errorf("All hides %q", got)
	}
}

// TestChainShowsHiddenMembersWithoutNames: a chain through a hidden
// project shows it as hidden-1 with its state only; a chain with no
// visible member is absent.
func TestChainShowsHiddenMembersWithoutNames(t *testing.T) {
	c := chain.ChainView{ID: 1, State: chain.Blocked, Roots: []string{"h/secret"},
		Reasons: []chain.Reason{{Kind: chain.ReasonPipeline, Project: "h/secret", PipelineID: 9, Detail: "pipeline 9 of h/secret succeeded"}},
		Members: []chain.MemberView{
			{Project: "g/app", State: chain.MemberBlocked, Upstreams: []string{"h/secret"}, Why: "blocked: h/secret failed (pipeline 10)"},
			{Project: "h/secret", State: chain.Failed, PipelineID: 10, PipelineURL: "https://gitlab/h/secret/-/pipelines/10", Why: "pipeline 10 failed",
				Upstreams: []string{}, VerifyDetail: "h/secret is stale"},
		},
		Skipped: []chain.Skip{{Project: "h/secret", Why: "cycle"}}}
	v, ok := scope().Chain(c)
	if !ok {
		t.Fatal("the chain is absent")
	}
	all := strings.Join([]string{v.Roots[0], v.Reasons[0].Project, v.Reasons[0].Detail, v.Members[0].Why,
		v.Members[0].Upstreams[0], v.Members[1].Project, v.Members[1].Why, v.Members[1].PipelineURL, v.Members[1].VerifyDetail}, " ")
	if strings.Contains(all, "secret") || len(v.Skipped) != 0 {
		t.Fatalf("a hidden name shows: %s %+v", all, v.Skipped)
	}
	if m := v.Members[1]; !m.Hidden || m.Project != "hidden-1" || m.State != chain.Failed || m.PipelineID != 0 ||
		v.Members[0].Upstreams[0] != "hidden-1" || v.Roots[0] != "hidden-1" {
		t.Errorf("hidden member %+v, roots %v", m, v.Roots)
	}
	c.Members = c.Members[1:]
	if _, ok := scope().Chain(c); ok {
		t.Error("a chain of hidden members only is listed")
	}
	if got := scope().Rows([]verify.Row{{Project: "h/secret"}, {Project: "g/app", Detail: "built on h/secret"}}); len(got) != 1 || got[0].Detail != "built on (hidden)" {
		t.Errorf("rows = %+v", got)
	}
}

// TestChainHidesPinMovesOfHiddenProjects: a visible member's pinned
// upstreams are named as its upstreams are (a hidden one by its label),
// its own merge request shown; a hidden member's merge request is not, and
// what depsd wrote to a hidden project is left out of the chain's writes.
func TestChainHidesPinMovesOfHiddenProjects(t *testing.T) {
	c := chain.ChainView{ID: 1, State: chain.Running, Roots: []string{"h/secret"},
		Members: []chain.MemberView{
			{Project: "g/app", State: chain.WaitingMerge, Upstreams: []string{"h/secret"}, Pinned: []string{"h/secret"},
				MergeRequest: "https://gitlab/g/app/-/merge_requests/4", Why: "waiting for merge request !4 (moves r/h/secret:3 sha256:1 → sha256:2)"},
			{Project: "h/other", State: chain.WaitingMerge, Upstreams: []string{"h/secret"}, Pinned: []string{"h/secret"},
				MergeRequest: "https://gitlab/h/other/-/merge_requests/2", MergeSHA: "abc"},
			{Project: "h/secret", State: chain.Success},
		},
		Writes: []chain.Write{
			{Project: "g/app", Kind: "merge-request", Detail: "opened merge request !4: depsd: move the digest pins of h/secret", URL: "https://gitlab/g/app/-/merge_requests/4"},
			{Project: "h/other", Kind: "commit", Detail: "commit 5e1f on depsd/pins", URL: "https://gitlab/h/other/-/commit/5e1f"},
		}}
	v, ok := scope().Chain(c)
	if !ok {
		t.Fatal("the chain is absent")
	}
	app, other := v.Members[0], v.Members[1]
	if strings.Join(app.Pinned, ",") != strings.Join(app.Upstreams, ",") || strings.Contains(app.Why, "secret") || app.MergeRequest == "" {
		t.Errorf("visible member %+v", app)
	}
	if other.MergeRequest != "" || other.MergeSHA != "" || len(other.Pinned) != 0 {
		t.Errorf("hidden member %+v", other)
	}
	if len(v.Writes) != 1 || v.Writes[0].Project != "g/app" || strings.Contains(v.Writes[0].Detail, "secret") {
		t.Errorf("writes %+v", v.Writes)
	}
	st := scope().Stats(chain.Stats{Members: map[chain.MemberState]int{chain.WaitingMerge: 9}}, []chain.ChainView{c})
	if st.Members[chain.WaitingMerge] != 1 {
		t.Errorf("stats count %d members waiting-merge, want the visible one", st.Members[chain.WaitingMerge])
	}
}

// TestValidationShowsOnlyWhatThePersonMaySee: a validation of a merge
// request of a project the person sees shows its hidden dependents as
// hidden labels, its summary without their paths, and only their tags;
// one of a hidden project's merge request is absent.
func TestValidationShowsOnlyWhatThePersonMaySee(t *testing.T) {
	c := chain.ChainView{ID: 4, Kind: chain.KindValidation, State: chain.Finished, Roots: []string{"g/base"},
		Members: []chain.MemberView{
			{Project: "g/app", State: chain.Success, Upstreams: []string{"g/base"}},
			{Project: "g/base", State: chain.Success},
			{Project: "h/secret", State: chain.Failed, PipelineID: 12, Upstreams: []string{"g/base"}, Why: "pipeline 12 failed"},
		}}
	v := chain.ValidationView{Project: "g/base", IID: 3, Result: chain.CommitFailed, Summary: "1 of 2 dependents built, 1 failed: h/secret",
		Chain: &c, Chains: []int64{4}, Cleanup: []chain.TagCleanup{
			{Project: "g/base", Image: "r/g/base:mr-3"}, {Project: "h/secret", Image: "r/h/secret:depsd-validate-4"}}}
	got, ok := scope().Validation(v)
	if !ok {
		t.Fatal("the validation of a visible project's merge request is absent")
	}
	if strings.Contains(got.Summary, "secret") || len(got.Cleanup) != 1 || got.Chain.Members[2].Project != "hidden-1" || got.Chain.Members[2].PipelineID != 0 {
		t.Errorf("a hidden dependent shows: %+v %+v %+v", got.Summary, got.Cleanup, got.Chain.Members[2])
	}
	v.Project = "h/secret"
	if _, ok := scope().Validation(v); ok {
		t.Error("the validation of a hidden project's merge request is shown")
	}
	if list := scope().Validations([]chain.ValidationView{v}); len(list) != 0 {
		t.Errorf("listed %+v", list)
	}
}
