package dashboard

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/verify"
	"gitlab.com/depsd/depsd/visible"
)

// filteredChains filters by state and project as the engine does.
type filteredChains []chain.ChainView

func (f filteredChains) Chains(_ context.Context, fl chain.Filter) ([]chain.ChainView, error) {
	var out []chain.ChainView
	for _, c := range f {
		if fl.State != "" && c.State != fl.State {
			continue
		}
		if fl.Project != "" && !strings.Contains(strings.Join(func() []string {
			var ps []string
			for _, m := range c.Members {
				ps = append(ps, m.Project)
			}
			return ps
		}(), " "), fl.Project) {
			continue
		}
		out = append(out, c)
	}
	return out, nil
}
func (f filteredChains) Chain(ctx context.Context, id int64) (chain.ChainView, error) {
	return fakeChains(f).Chain(ctx, id)
}
func (f filteredChains) Stats(context.Context) (chain.Stats, error) {
	return chain.Stats{ActiveChains: 2, BlockedChains: 2, PendingActions: 7, UnprocessedEvts: 3}, nil
}

// fakeValidations are the validations of merge requests, by chain id.
type fakeValidations []chain.ValidationView

func (f fakeValidations) Validations(context.Context, chain.MRFilter) ([]chain.ValidationView, error) {
	return f, nil
}
func (f fakeValidations) Validation(_ context.Context, id int64) (chain.ValidationView, error) {
	for _, v := range f {
		if v.Chain != nil && v.Chain.ID == id {
			return v, nil
		}
	}
	return chain.ValidationView{}, chain.ErrNotFound
}

// secretWorld is an instance where h/secret is a project ann may not
// see: downstream of g/base, in a chain with g/app, with images,
// schedules, a watch, a hook and audit entries of its own, and a chain of
// its own.
func secretWorld(t *testing.T) *http.ServeMux {
	t.Helper()
	from := func(p string) []deps.Dependency {
		return []deps.Dependency{{Kind: deps.KindFrom, Image: "r/" + p, Project: p}}
	}
	projects := []scan.Project{
		{Path: "g/base", ID: 1, DefaultBranch: "main", Dependencies: []deps.Dependency{{Kind: deps.KindFrom, Image: "debian:12"}}},
		{Path: "g/app", ID: 2, DefaultBranch: "main", Dependencies: from("g/base")},
		{Path: "h/secret", ID: 3, DefaultBranch: "main", Dependencies: from("g/base"),
			Warnings: []deps.Warning{{File: "Containerfile", Message: "h/secret warns"}}},
	}
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	chains := filteredChains{
		{ID: 1, State: chain.Blocked, Roots: []string{"g/base"}, Started: now, Updated: now,
			Reasons: []chain.Reason{{Kind: chain.ReasonPipeline, Project: "g/base", PipelineID: 4, At: now}},
			Members: []chain.MemberView{
				{Project: "g/app", State: chain.MemberBlocked, Upstreams: []string{"g/base", "h/secret"}, Why: "blocked: h/secret failed (pipeline 5)"},
				{Project: "g/base", State: chain.Success, PipelineID: 4, Upstreams: []string{}},
				{Project: "h/secret", State: chain.Failed, PipelineID: 5, PipelineURL: "https://gitlab.example/h/secret/-/pipelines/5",
					Upstreams: []string{"g/base"}, Why: "pipeline 5 failed", Verified: chain.ImageStale, VerifyDetail: "r/h/secret:latest is stale"},
			}},
		{ID: 2, State: chain.Blocked, Roots: []string{"h/secret"}, Started: now, Updated: now,
			Members: []chain.MemberView{{Project: "h/secret", State: chain.Failed, Upstreams: []string{}}}},
	}
	rows := []verify.Row{
		{Project: "g/app", Image: "r/g/app:latest", State: verify.StateFresh, Detail: "built on r/g/base:latest",
			Upstreams: []verify.Verdict{{Upstream: "r/g/base:latest", State: verify.StateFresh}}},
		{Project: "h/secret", Image: "r/h/secret:latest", State: verify.StateStale, Detail: "stale"},
	}
	d, err := New(Options{Store: fakeStore{projects}, Chains: chains, Now: func() time.Time { return now },
		Freshness: func(_ context.Context, ps ...string) ([]verify.Row, error) {
			var out []verify.Row
			for _, r := range rows {
				if len(ps) == 0 || strings.Contains(strings.Join(ps, " "), r.Project) {
					out = append(out, r)
				}
			}
			return out, nil
		},
		Schedules: func(context.Context) ([]scheduler.Entry, error) {
			return []scheduler.Entry{
				{Kind: scheduler.KindRebuild, Target: "h/secret", Spec: "@daily", LastOutcome: "chain 2"},
				{Kind: scheduler.KindRebuild, Target: "g/app", Spec: "@weekly"},
				{Kind: scheduler.KindWatch, Target: "r/h/secret:latest", Projects: []string{"h/secret", "g/app"}},
			}, nil
		},
		Hooks: func(context.Context) HookStatus {
			return HookStatus{URL: "https://depsd/hooks/gitlab", CheckedAt: now, Report: gitlab.HookReport{Changes: []gitlab.HookChange{
				{Project: "h/secret", Action: gitlab.HookCreated}, {Project: "g/app", Action: gitlab.HookUnchanged},
				{Project: "h", Group: true, Action: gitlab.HookUnchanged},
			}}}
		},
		Audit: func(_ context.Context, f chain.AuditFilter) ([]chain.AuditEntry, error) {
			return []chain.AuditEntry{
				{ID: 2, ChainID: 1, Actor: "bob", Action: chain.AuditRetry, Target: "h/secret", Outcome: chain.OutcomeDone, At: now},
				{ID: 1, ChainID: 1, Actor: "ann", Action: chain.AuditSkip, Target: "g/app", Reason: "h/secret is gone", Outcome: chain.OutcomeDone, At: now},
			}, nil
		},
		Validations: fakeValidations{
			{Project: "g/base", IID: 3, State: chain.MROpened, Result: chain.CommitFailed, Summary: "1 of 2 dependents built, 1 failed: h/secret",
				Chains: []int64{9}, Chain: &chain.ChainView{ID: 9, Kind: chain.KindValidation, State: chain.Finished, Roots: []string{"g/base"},
					Validation: &chain.Validation{ProjectID: 1, IID: 3, Candidate: "r/g/base:mr-3", Digest: "sha256:c", PipelineID: 30},
					Members: []chain.MemberView{
						{Project: "g/app", State: chain.Success, PipelineID: 31, Upstreams: []string{"g/base"}},
						{Project: "g/base", State: chain.Success, PipelineID: 30, Upstreams: []string{}},
						{Project: "h/secret", State: chain.Failed, PipelineID: 32, Upstreams: []string{"g/base"}, Why: "pipeline 32 failed", Built: "r/h/secret:depsd-validate-9@sha256:s"},
					}},
				Cleanup: []chain.TagCleanup{{Project: "g/base", Image: "r/g/base:mr-3"}, {Project: "h/secret", Image: "r/h/secret:depsd-validate-9"}}},
			{Project: "h/secret", IID: 4, State: chain.MROpened, Chains: []int64{10}, Chain: &chain.ChainView{ID: 10, Kind: chain.KindValidation, State: chain.Running,
				Roots: []string{"h/secret"}, Members: []chain.MemberView{{Project: "h/secret", State: chain.Success, Upstreams: []string{}}}}},
		},
		Viewer: func(*http.Request) Viewer {
			return Viewer{Name: "ann", CSRF: "tok", Key: "ann", SeenAt: now,
				Scope: visible.For(visible.Set([]string{"g/base", "g/app"}), visible.Set([]string{"g/base", "g/app", "h/secret"}))}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	d.Register(mux)
	return mux
}

// TestEveryRouteShowsOnlyWhatThePersonMaySee asks every page of the
// dashboard as ann, who may not see h/secret: its name appears nowhere,
// its pages and its own chain are absent (404, as if not in scope), its
// member in a shared chain is "hidden", and counts count only what ann
// sees. A route this test does not ask fails it.
func TestEveryRouteShowsOnlyWhatThePersonMaySee(t *testing.T) {
	mux := secretWorld(t)
	asked := map[string]bool{}
	for _, tc := range []struct {
		route, path string
		code        int
		want        []string
	}{
		{"GET /{$}", "/", 200, []string{`href="/chains/1"`, "signed in as"}},
		{"GET /{$}", "/?part=active", 200, []string{`chain-1`}},
		{"GET /chains/{id}", "/chains/1", 200, []string{"hidden", "blocked: (hidden) failed", "Audit log of chain 1", "Skip", "Cancel chain 1"}},
		{"GET /chains/{id}", "/chains/1?part=chain", 200, []string{"hidden"}},
		{"GET /chains/{id}", "/chains/2", 404, []string{"there is no chain 2"}},
		{"GET /graph", "/graph", 200, []string{`data-project="g/app"`}},
		{"GET /graph", "/graph?focus=g/base", 200, []string{`data-project="g/app"`}},
		{"GET /graph", "/graph?focus=h/secret", 400, []string{"not in the scanned graph"}},
		{"GET /graph.svg", "/graph.svg", 200, []string{"<svg"}},
		{"GET /graph.svg", "/graph.svg?focus=g/base", 200, []string{"g/app"}},
		{"GET /graph/projects", "/graph/projects", 200, []string{`<option value="g/app">`}},
		{"GET /projects/{path...}", "/projects/g/base", 200, []string{"Rebuild from here", "1 project you cannot see"}},
		{"GET /projects/{path...}", "/projects/h/secret", 404, []string{"not in the scanned graph"}},
		{"GET /health", "/health", 200, []string{"<dd>2 (1 dependencies, 1 external images)</dd>", "<dt>Active chains</dt><dd>1</dd>",
			"<dt>Pipelines waiting to be created</dt><dd>0</dd>"}},
		{"GET /validations", "/validations", 200, []string{`href="/validations/9"`, "g/base", "1 failed"}},
		{"GET /validations/{id}", "/validations/9", 200, []string{"hidden", "r/g/base:mr-3@sha256:c", "#31", "r/g/base:mr-3"}},
		{"GET /validations/{id}", "/validations/9?part=validation", 200, []string{"hidden"}},
		{"GET /validations/{id}", "/validations/10", 404, []string{"there is no validation 10"}},
		{"GET /freshness", "/freshness", 200, []string{"of 1 image"}},
		{"GET /freshness", "/freshness?project=h/", 200, []string{"of 0 images"}},
	} {
		asked[tc.route] = true
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
		body := rec.Body.String()
		if rec.Code != tc.code {
			t.Errorf("GET %s: %d, want %d\n%.400s", tc.path, rec.Code, tc.code, body)
		}
		if strings.Contains(tc.path, "h/secret") {
			// Asked by name: the answer is the one for a project that
			// does not exist, which repeats the name asked for.
			absent := httptest.NewRecorder()
			mux.ServeHTTP(absent, httptest.NewRequest("GET", strings.ReplaceAll(tc.path, "h/secret", "h/absent"), nil))
			if got := strings.ReplaceAll(absent.Body.String(), "h/absent", "h/secret"); absent.Code != rec.Code || got != body {
				t.Errorf("GET %s differs from the answer for a project that does not exist", tc.path)
			}
		} else if strings.Contains(body, "secret") {
			i := strings.Index(body, "secret")
			t.Errorf("GET %s shows a hidden project: …%s…", tc.path, body[max(0, i-120):min(len(body), i+60)])
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s: no %q in\n%.600s", tc.path, w, body)
			}
		}
	}
	d, _ := New(Options{Store: fakeStore{}, Chains: fakeChains{}})
	for _, rt := range d.routes() {
		if !asked[rt.pattern] {
			t.Errorf("route %s is not asked by this test: add it, with what a person who may not see everything gets", rt.pattern)
		}
	}
}
