package chain_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/registry"
	"gitlab.com/depsd/depsd/registry/registrytest"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/store/storetest"
	"gitlab.com/depsd/depsd/webhook"
)

// valEnv is base → {ruby, python} → app (app FROM ${RUBY}, COPY --from
// python), and legacy FROM base, on the fake GitLab whose pipelines push
// real images to a real registry, built as the build component builds
// them: a merge request of base pushes its candidate base:mr-<iid>, a
// validation builds on what depsd_build_contexts names and pushes only
// depsd_validate_tag. Every pipeline stays "created" until the test ends
// it; the engine hears of them through the Pipeline Hooks GitLab sent
// (deliver), as depsd's receiver would.
type valEnv struct {
	*glEnv
	host      string
	reg       *registry.Client
	delivered int
	verifier  *fakeVerifier
	projects  []scan.Project // as scanned
}

const (
	valCI    = "build:\n  script:\n    - build --validate \"$DEPSD_VALIDATE\" --contexts \"$DEPSD_BUILD_CONTEXTS\"\n"
	valURL   = "https://depsd.example.com/validations/"
	legacyCI = "spec:\n  inputs:\n    depsd_action_id:\n      default: \"\"\n---\nbuild:\n  script: [make]\n"
)

func newValEnv(t *testing.T, rule chain.PremergeRule, hc *http.Client) *valEnv {
	t.Helper()
	host := registrytest.Start(t)
	clk := &clock{t: time.Now().UTC()}
	srv := gitlabtest.New(gitlabtest.Options{Now: clk.Now, RegistryHost: host})
	t.Cleanup(srv.Close)
	client, err := gitlab.New(gitlab.Config{BaseURL: srv.URL, Token: srv.Token, RequestsPerMinute: -1, MaxRetries: -1, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	path := storetest.State(t)
	s, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	img := func(p string) string { return host + "/" + p + ":latest" }
	files := map[string]string{
		"g/base":   "FROM scratch\n",
		"g/ruby":   "FROM " + img("g/base") + "\n",
		"g/python": "FROM " + img("g/base") + "\n",
		"g/app":    "ARG RUBY=" + img("g/ruby") + "\nFROM ${RUBY}\nCOPY --from=" + img("g/python") + " /usr/lib/python /usr/lib/python\n",
		"g/legacy": "FROM " + img("g/base") + "\n",
	}
	from := map[string]string{"g/ruby": img("g/base"), "g/python": img("g/base"), "g/app": img("g/ruby"), "g/legacy": img("g/base")}
	regMap := deps.NewRegistryMap(map[string]string{host + "/g/base": "g/base", host + "/g/ruby": "g/ruby", host + "/g/python": "g/python"})
	recv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(recv.Close)
	var projects []scan.Project
	for _, n := range []string{"g/app", "g/base", "g/legacy", "g/python", "g/ruby"} {
		ci := valCI
		if n == "g/legacy" {
			ci = legacyCI
		}
		id, err := srv.AddProject(gitlabtest.Project{Path: n, Files: map[string]string{"Containerfile": files[n], ".gitlab-ci.yml": ci}})
		if err != nil {
			t.Fatal(err)
		}
		a, err := deps.AnalyzeContainerfile("Containerfile", []byte(files[n]), deps.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range a.Dependencies {
			a.Dependencies[i].Project, _ = regMap.Project(d.Repository)
		}
		p := scan.Project{ID: id, Path: n, DefaultBranch: "main", File: "Containerfile", RegistryPrefix: host + "/" + n,
			Visibility: "internal", Files: []scan.File{{Name: "Containerfile", Content: []byte(files[n])}}, Dependencies: a.Dependencies}
		if n == "g/legacy" {
			p.PipelineIdent = scan.IdentInputs
			if err := srv.SetCISettings(n, gitlabtest.RestrictedCISettings(gitlabtest.RoleMaintainer)); err != nil {
				t.Fatal(err)
			}
		}
		projects = append(projects, p)
		if err := srv.SetVisibility(n, "internal"); err != nil {
			t.Fatal(err)
		}
		if err := srv.SetImages(n, gitlabtest.Images{Refs: []string{img(n)}, From: from[n], Annotate: true}); err != nil {
			t.Fatal(err)
		}
		if err := srv.SetPipelineBehavior(n, gitlabtest.Behavior{OnMergeRequest: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.AddHook(n, gitlabtest.Hook{URL: recv.URL, Events: []string{"pipeline_events"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ApplyScan(t.Context(), projects, scan.Meta{StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	reg := registry.New(registry.Options{Insecure: []string{host}})
	fresh := []chain.Verification{{State: chain.ImageFresh, Detail: "fresh"}}
	v := newFakeVerifier(map[string][]chain.Verification{"g/base": fresh, "g/ruby": fresh, "g/python": fresh, "g/app": fresh, "g/legacy": fresh})
	rule.Projects = []string{"g/base"}
	cfg := chain.Config{Verifier: v, Premerge: &chain.PremergeOptions{Rules: chain.PremergeRules{rule}, Registry: reg,
		URL: func(id int64) string { return fmt.Sprintf("%s%d", valURL, id) }}}
	g := &glEnv{t: t, ctx: t.Context(), srv: srv, client: client, store: s, path: path, clock: clk, cfg: cfg}
	e := &valEnv{glEnv: g, host: host, reg: reg, verifier: v, projects: projects}
	g.engine = e.newEngine()
	// The base's release, which everyone is built on.
	id, err := srv.RunPipeline("g/base", "main", "push")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.SetPipelineStatus(id, "success"); err != nil {
		t.Fatal(err)
	}
	e.delivered = len(srv.Deliveries()) // the release's events are another test's
	return e
}

// newEngine is an engine on e's store with e's options and client.
func (e *valEnv) newEngine() *chain.Engine {
	cfg := e.cfg
	pm := *cfg.Premerge
	pm.GitLab = e.client
	cfg.Premerge = &pm
	cfg.Store, cfg.GitLab, cfg.Graph, cfg.Now = e.store, e.client, e.store.Graph, e.clock.Now
	en, err := chain.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return en
}

// deliver applies the Pipeline Hooks GitLab sent since the last call, as
// depsd's receiver would (premerge covering base).
func (e *valEnv) deliver() {
	e.t.Helper()
	ds := e.srv.Deliveries()
	covers := e.cfg.Premerge.Rules.Covers
	for _, d := range ds[e.delivered:] {
		ev, err := webhook.Decode(d.Event, d.Payload, nil, nil, covers, time.Now())
		if err != nil {
			continue // ignored by the receiver too
		}
		if _, err := e.engine.RecordEvent(e.ctx, d.IdempotencyKey, chain.Event{Pipeline: ev.Pipeline, Push: ev.Push}); err != nil {
			e.t.Fatal(err)
		}
	}
	e.delivered = len(ds)
	if _, err := e.engine.ProcessInbox(e.ctx); err != nil {
		e.t.Fatal(err)
	}
}

// validate runs the validations' work once.
func (e *valEnv) validate() {
	e.t.Helper()
	if err := e.engine.ValidatePending(e.ctx); err != nil {
		e.t.Fatal(err)
	}
}

// step sends what is due (pipelines, statuses, notes) and applies what
// GitLab said about it, until nothing moves.
func (e *valEnv) step() {
	e.t.Helper()
	for range 5 {
		e.deliver()
		e.validate()
		e.send()
		if _, err := e.engine.SendStatuses(e.ctx); err != nil {
			e.t.Fatal(err)
		}
		if _, err := e.engine.VerifyPending(e.ctx); err != nil {
			e.t.Fatal(err)
		}
		e.deliver()
	}
}

// openMR opens a merge request of base whose branch changes its
// Containerfile, and returns its iid and its pipeline.
func (e *valEnv) openMR(branch string) (int64, gitlabtest.Pipeline) {
	e.t.Helper()
	if err := e.srv.CreateBranch("g/base", branch); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.srv.SetFileOn("g/base", branch, "Containerfile", "FROM scratch\nRUN rm -rf /usr/lib/ruby\n"); err != nil {
		e.t.Fatal(err)
	}
	iid, err := e.srv.OpenMR("g/base", branch, "main", "Slim the base: "+branch)
	if err != nil {
		e.t.Fatal(err)
	}
	return iid, e.mrPipeline(iid)
}

// mrPipeline is the newest pipeline of merge request iid of base.
func (e *valEnv) mrPipeline(iid int64) gitlabtest.Pipeline {
	e.t.Helper()
	var out gitlabtest.Pipeline
	for _, p := range e.srv.Pipelines("g/base") {
		if p.MergeRequestIID == iid {
			out = p
		}
	}
	if out.ID == 0 {
		e.t.Fatalf("no pipeline of merge request !%d", iid)
	}
	return out
}

// succeed ends pipeline id successfully on GitLab (its images pushed)
// and returns the digest it pushed ("" for none).
func (e *valEnv) succeed(id int64) string {
	e.t.Helper()
	before := len(e.srv.PublishedImages())
	if err := e.srv.SetPipelineStatus(id, "success"); err != nil {
		e.t.Fatal(err)
	}
	if pushed := e.srv.PublishedImages()[before:]; len(pushed) > 0 {
		return pushed[0].Digest
	}
	return ""
}

// validations are the validation pipelines depsd created in project.
func (e *valEnv) validations(project string) []gitlabtest.Pipeline {
	var out []gitlabtest.Pipeline
	for _, p := range e.srv.Pipelines(project) {
		if p.Source == "api" && (p.Variables[chain.VarValidate] == "1" || fmt.Sprint(p.Inputs[chain.InputValidate]) == "true") {
			out = append(out, p)
		}
	}
	return out
}

// endValidation ends project's newest validation pipeline with status on
// GitLab (a success pushes what the build component pushes).
func (e *valEnv) endValidation(project, status string) gitlabtest.Pipeline {
	e.t.Helper()
	ps := e.validations(project)
	if len(ps) == 0 {
		e.t.Fatalf("no validation pipeline of %s", project)
	}
	p := ps[len(ps)-1]
	if status == "success" {
		e.succeed(p.ID)
	} else if err := e.srv.SetPipelineStatus(p.ID, status); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// mr is merge request iid of base as depsd keeps it.
func (e *valEnv) mr(iid int64) chain.MRValidation {
	e.t.Helper()
	list, err := e.engine.MRValidations(e.ctx, chain.MRFilter{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, v := range list {
		if v.IID == iid {
			return v
		}
	}
	e.t.Fatalf("merge request !%d not kept", iid)
	return chain.MRValidation{}
}

// shownStatus is depsd/dependents on pipeline pl as GitLab shows it.
func (e *valEnv) shownStatus(pl gitlabtest.Pipeline) gitlabtest.CommitStatus {
	var out gitlabtest.CommitStatus
	for _, s := range e.srv.Statuses("g/base", pl.SHA) {
		if s.Name == chain.ValidationStatusName && s.PipelineID == pl.ID {
			out = s
		}
	}
	return out
}

// note is depsd's note on merge request iid of base ("" when none), and
// how many notes depsd wrote there.
func (e *valEnv) note(iid int64) (string, int) {
	for _, mr := range e.srv.MergeRequests("g/base") {
		if mr.IID != iid {
			continue
		}
		body, n := "", 0
		for _, nt := range mr.Notes {
			if strings.HasPrefix(nt.Body, "<!-- depsd: validation of !") {
				body, n = nt.Body, n+1
			}
		}
		return body, n
	}
	return "", 0
}

// tagExists reports whether the registry has image (host/path:tag).
func (e *valEnv) tagExists(image string) bool {
	_, err := e.reg.Digest(e.ctx, image)
	return err == nil
}

// TestValidationOfAMergeRequestWhoseDependentsBuild: a merge request of
// base whose pipeline pushed its candidate gets its direct dependents
// (depth 1) built on that candidate, each once, by pipelines on their
// default branch that publish nothing: the status depsd/dependents on
// the merge request pipeline goes success (the pipeline with it), and
// one note lists each dependent, its pipeline and result, and the
// candidate's digest. No release chain starts, nothing is verified, and
// a project whose pipelines take only the action id input cannot
// validate: skipped, said so, not failed.
func TestValidationOfAMergeRequestWhoseDependentsBuild(t *testing.T) {
	t.Parallel()
	e := newValEnv(t, chain.PremergeRule{}, nil)
	iid, mrp := e.openMR("slim")
	cand := e.succeed(mrp.ID)
	if cand == "" {
		t.Fatal("the merge request pipeline pushed no candidate")
	}
	e.step()

	v := e.mr(iid)
	if v.ChainID == 0 || v.StartDue {
		t.Fatalf("merge request %+v: want its validation started", v)
	}
	for _, p := range []string{"g/ruby", "g/python"} {
		ps := e.validations(p)
		if len(ps) != 1 {
			t.Fatalf("%s: %d validation pipelines, want 1", p, len(ps))
		}
		want := e.host + "/g/base:latest=docker-image://" + e.host + "/g/base@" + cand
		if got := ps[0].Variables[chain.VarBuildContexts]; got != want || ps[0].Ref != "main" || ps[0].Variables[chain.VarValidateTag] != "" {
			t.Errorf("%s built on %q (ref %s, tag %q); want %q on main, no tag", p, got, ps[0].Ref, ps[0].Variables[chain.VarValidateTag], want)
		}
	}
	if ps := e.validations("g/app"); len(ps) != 0 {
		t.Errorf("depth 1 built app too: %+v", ps)
	}
	if ps := e.srv.Pipelines("g/legacy"); len(ps) != 0 && len(e.validations("g/legacy")) != 0 {
		t.Errorf("legacy, which cannot validate, got a validation pipeline: %+v", ps)
	}
	if s := e.shownStatus(mrp); s.Status != "running" && s.Status != "pending" {
		t.Errorf("status while building: %+v", s)
	}
	for _, p := range []string{"g/ruby", "g/python"} {
		pl := e.endValidation(p, "success")
		for _, pub := range e.srv.PublishedImages() {
			if pub.PipelineID == pl.ID {
				t.Errorf("the validation of %s published %s", p, pub.Ref)
			}
		}
	}
	e.step()
	e.clock.Advance(time.Minute) // past the note's interval
	e.step()

	view, err := e.engine.Chain(e.ctx, v.ChainID)
	if err != nil {
		t.Fatal(err)
	}
	if view.State != chain.Finished || view.Kind != chain.KindValidation {
		t.Fatalf("validation %s (%s): %+v", view.State, view.Kind, view.Members)
	}
	if m := member(view, "g/legacy"); m.State != chain.MemberSkipped || !strings.Contains(m.Why, "cannot validate") || !strings.Contains(m.Why, "depsd_build_contexts") {
		t.Errorf("legacy %s: %s; want skipped, cannot validate, with what to declare", m.State, m.Why)
	}
	if s := e.shownStatus(mrp); s.Status != "success" || !strings.Contains(s.Description, "2 of 3 dependents built") ||
		s.TargetURL != fmt.Sprintf("%s%d", valURL, v.ChainID) {
		t.Errorf("status %+v: want success, 2 of 3 built, linking the validation", s)
	}
	body, notes := e.note(iid)
	if notes != 1 {
		t.Fatalf("%d notes by depsd, want 1", notes)
	}
	for _, want := range []string{"g/ruby | built", "g/python | built", "g/legacy | cannot validate", cand, "every dependent builds"} {
		if !strings.Contains(body, want) {
			t.Errorf("note does not say %q:\n%s", want, body)
		}
	}
	chains, err := e.engine.Chains(e.ctx, chain.Filter{})
	if err != nil || len(chains) != 0 {
		t.Errorf("release chains %+v, %v: a candidate is never a release", chains, err)
	}
	if calls := e.verifier.calls(); len(calls) != 0 {
		t.Errorf("verified %v: a validation publishes nothing", calls)
	}
}

// TestValidationOfAChangeThatBreaksRuby: at depth all, base's change
// breaks ruby's build: ruby fails, app (built on ruby and python) is not
// built, python is and pushes its validation image for the level below;
// the status is failed, and the note names ruby and links its pipeline.
func TestValidationOfAChangeThatBreaksRuby(t *testing.T) {
	t.Parallel()
	e := newValEnv(t, chain.PremergeRule{Depth: chain.DepthAll}, nil)
	iid, mrp := e.openMR("slim")
	cand := e.succeed(mrp.ID)
	e.srv.BreakBuildOn("g/ruby", cand)
	e.step()
	rubyPl := e.endValidation("g/ruby", "success") // its build on the candidate fails
	if got := e.srv.Pipelines("g/ruby"); got[len(got)-1].Status != "failed" {
		t.Fatalf("ruby's validation: %s, want failed (its build breaks on the candidate)", got[len(got)-1].Status)
	}
	py := e.endValidation("g/python", "success")
	if py.Variables[chain.VarValidateTag] == "" {
		t.Errorf("python, which app builds on, pushes no validation image: %+v", py.Variables)
	}
	e.step()
	e.clock.Advance(time.Minute)
	e.step()

	v := e.mr(iid)
	view, err := e.engine.Chain(e.ctx, v.ChainID)
	if err != nil {
		t.Fatal(err)
	}
	if m := member(view, "g/ruby"); m.State != chain.Failed || m.PipelineID != rubyPl.ID {
		t.Errorf("ruby %+v: want failed with pipeline %d", m, rubyPl.ID)
	}
	if m := member(view, "g/python"); m.State != chain.Success || m.Verified != "" {
		t.Errorf("python %+v: want built", m)
	}
	if m := member(view, "g/app"); m.State != chain.MemberBlocked || len(e.validations("g/app")) != 0 {
		t.Errorf("app %s with %d validation pipelines: nothing below ruby is built", m.State, len(e.validations("g/app")))
	}
	if s := e.shownStatus(mrp); s.Status != "failed" || !strings.Contains(s.Description, "1 failed: g/ruby") {
		t.Errorf("status %+v: want failed naming g/ruby", s)
	}
	if got := e.mrPipeline(iid); got.Status != "failed" {
		t.Errorf("merge request pipeline %s: a failed depsd/dependents fails it", got.Status)
	}
	body, _ := e.note(iid)
	for _, want := range []string{"g/ruby | **failed** | [#" + fmt.Sprint(rubyPl.ID) + "]", "g/app | blocked", "**failed**"} {
		if !strings.Contains(body, want) {
			t.Errorf("note does not say %q:\n%s", want, body)
		}
	}
	// The failed merge request pipeline's own events start nothing.
	if n := len(e.validations("g/ruby")); n != 1 {
		t.Errorf("%d validations of ruby, want 1", n)
	}
}

// TestValidationOfADiamond: at depth all, app (built on ruby and python)
// is built once, after both, on both validation images.
func TestValidationOfADiamond(t *testing.T) {
	t.Parallel()
	e := newValEnv(t, chain.PremergeRule{Depth: chain.DepthAll}, nil)
	_, mrp := e.openMR("slim")
	e.succeed(mrp.ID)
	e.step()
	e.endValidation("g/ruby", "success")
	e.step()
	if n := len(e.validations("g/app")); n != 0 {
		t.Fatalf("app built before python: %d", n)
	}
	e.endValidation("g/python", "success")
	e.step()
	apps := e.validations("g/app")
	if len(apps) != 1 {
		t.Fatalf("%d validations of app, want 1", len(apps))
	}
	ctxs := apps[0].Variables[chain.VarBuildContexts]
	for _, want := range []string{"RUBY=docker-image://" + e.host + "/g/ruby@sha256:", e.host + "/g/python:latest=docker-image://" + e.host + "/g/python@sha256:"} {
		if !strings.Contains(ctxs, want) {
			t.Errorf("app's build contexts %q lack %q", ctxs, want)
		}
	}
	if apps[0].Variables[chain.VarValidateTag] != "" {
		t.Errorf("app has no dependent yet pushes %q", apps[0].Variables[chain.VarValidateTag])
	}
	pl := e.endValidation("g/app", "success")
	var built string
	for _, p := range e.srv.PublishedImages() {
		if p.PipelineID == pl.ID {
			t.Errorf("app's validation pushed %s", p.Ref)
		}
	}
	_ = built
}

// TestValidationStartsOverOnANewPush: a push to the merge request while
// its dependents build calls that validation off: its running pipelines
// are canceled on GitLab and the old status ends canceled; the new
// commit's candidate is validated anew, and the one note follows it.
func TestValidationStartsOverOnANewPush(t *testing.T) {
	t.Parallel()
	e := newValEnv(t, chain.PremergeRule{}, nil)
	iid, first := e.openMR("slim")
	e.succeed(first.ID)
	e.step()
	old := e.mr(iid).ChainID
	rubyOld := e.validations("g/ruby")[0]
	if err := e.srv.SetPipelineStatus(rubyOld.ID, "running"); err != nil {
		t.Fatal(err)
	}
	e.step()
	if _, err := e.srv.PushToMR("g/base", iid, "Containerfile", "FROM scratch\nRUN true\n"); err != nil {
		t.Fatal(err)
	}
	second := e.mrPipeline(iid)
	if err := e.srv.SetPipelineStatus(second.ID, "running"); err != nil { // its first hook
		t.Fatal(err)
	}
	e.step()
	for _, p := range []string{"g/ruby", "g/python"} {
		for _, pl := range e.validations(p) {
			if pl.Status != "canceled" {
				t.Errorf("%s pipeline %d of the old commit: %s, want canceled", p, pl.ID, pl.Status)
			}
		}
	}
	view, err := e.engine.Chain(e.ctx, old)
	if err != nil || view.State != chain.ChainCanceled {
		t.Fatalf("old validation %s, %v: want canceled", view.State, err)
	}
	e.clock.Advance(time.Minute) // past the status's interval
	e.step()
	if s := e.shownStatus(first); s.Status != "canceled" {
		t.Errorf("old status %+v: want canceled", s)
	}
	cand := e.succeed(second.ID)
	e.step()
	v := e.mr(iid)
	if v.ChainID == old || v.PipelineID != second.ID {
		t.Fatalf("merge request %+v: want a new validation of pipeline %d", v, second.ID)
	}
	for _, p := range []string{"g/ruby", "g/python"} {
		ps := e.validations(p)
		if len(ps) != 2 || !strings.Contains(ps[1].Variables[chain.VarBuildContexts], cand) {
			t.Errorf("%s: %d validations, the newest on %q; want 2, on %s", p, len(ps), ps[len(ps)-1].Variables[chain.VarBuildContexts], cand)
		}
		e.endValidation(p, "success")
	}
	e.step()
	e.clock.Advance(time.Minute)
	e.step()
	if s := e.shownStatus(second); s.Status != "success" {
		t.Errorf("new status %+v: want success", s)
	}
	if body, n := e.note(iid); n != 1 || !strings.Contains(body, cand) || !strings.Contains(body, "every dependent builds") {
		t.Errorf("%d notes; the note:\n%s\nwant one, on the new candidate", n, body)
	}
}

// TestValidationTagsDeletedWhenTheMergeRequestEnds: merged, or closed, a
// merge request's validation still running is called off (its pipelines
// canceled) and the tags its validations pushed (the candidate, the
// validation images) are deleted from the registry through GitLab's API.
func TestValidationTagsDeletedWhenTheMergeRequestEnds(t *testing.T) {
	t.Parallel()
	for _, end := range []string{"merge", "close"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			e := newValEnv(t, chain.PremergeRule{Depth: chain.DepthAll}, nil)
			iid, mrp := e.openMR("slim")
			e.succeed(mrp.ID)
			e.step()
			e.endValidation("g/python", "success")
			e.step()
			v := e.mr(iid)
			cand := e.host + "/g/base:mr-1"
			pyImage := e.host + "/g/python:" + chain.ValidateTag(v.ChainID)
			if !e.tagExists(cand) || !e.tagExists(pyImage) {
				t.Fatalf("before: candidate %v, python's validation image %v", e.tagExists(cand), e.tagExists(pyImage))
			}
			var err error
			if end == "merge" {
				err = e.srv.MergeMR("g/base", iid)
			} else {
				err = e.srv.CloseMR("g/base", iid)
			}
			if err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(2 * time.Minute) // past the check interval
			e.step()
			e.step()
			if e.tagExists(cand) || e.tagExists(pyImage) {
				t.Errorf("after: candidate %v, python's validation image %v; want both deleted", e.tagExists(cand), e.tagExists(pyImage))
			}
			if !e.tagExists(e.host + "/g/base:latest") {
				t.Error("the release tag was deleted")
			}
			v = e.mr(iid)
			want := map[string]chain.MRState{"merge": chain.MRMerged, "close": chain.MRClosed}[end]
			if v.State != want || v.CleanupPending() {
				t.Errorf("merge request %+v: want %s, cleaned up", v, want)
			}
			for _, pl := range e.validations("g/ruby") {
				if pl.Status != "canceled" {
					t.Errorf("ruby's validation %d: %s, want canceled", pl.ID, pl.Status)
				}
			}
			view, err := e.engine.Chain(e.ctx, v.ChainID)
			if err != nil || view.State != chain.ChainCanceled {
				t.Errorf("validation %s, %v: want canceled", view.State, err)
			}
		})
	}
}

// TestValidationPipelinesCreatedOnce: GitLab creates a validation
// pipeline but its answer is lost (the connection breaks): the next
// attempt finds and adopts it by its action id, as a release build's
// does; no second pipeline. The note's create lost the same way is found
// among the notes, not written twice.
func TestValidationPipelinesCreatedOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	lost := map[string]bool{} // "project/endpoint" whose answer was lost once
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err != nil || r.Method != http.MethodPost {
			return resp, err
		}
		key := ""
		switch {
		case strings.HasSuffix(r.URL.Path, "/pipeline"):
			key = r.URL.Path
		case strings.HasSuffix(r.URL.Path, "/notes"):
			key = r.URL.Path
		}
		mu.Lock()
		defer mu.Unlock()
		if key == "" || lost[key] {
			return resp, err
		}
		lost[key] = true
		resp.Body.Close()
		return nil, fmt.Errorf("connection reset after the request went through")
	})}
	e := newValEnv(t, chain.PremergeRule{}, hc)
	iid, mrp := e.openMR("slim")
	e.succeed(mrp.ID)
	for range 3 {
		e.step()
		e.clock.Advance(time.Minute) // past the actions' and the note's backoff
	}
	for _, p := range []string{"g/ruby", "g/python"} {
		if n := len(e.validations(p)); n != 1 {
			t.Errorf("%s: %d validation pipelines, want 1", p, n)
		}
	}
	for _, p := range []string{"g/ruby", "g/python"} {
		e.endValidation(p, "success")
	}
	for range 3 {
		e.step()
		e.clock.Advance(time.Minute)
	}
	if body, n := e.note(iid); n != 1 || !strings.Contains(body, "every dependent builds") {
		t.Errorf("%d notes by depsd; the last:\n%s\nwant one, complete", n, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lost) < 3 {
		t.Errorf("lost answers %v: the test lost too few", slices.Collect(func(yield func(string) bool) {
			for k := range lost {
				if !yield(k) {
					return
				}
			}
		}))
	}
}

// calls are the verifications asked so far.
func (f *fakeVerifier) calls() []chain.VerifyRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asked)
}

// TestCandidateIsNeverARelease: a merge request pipeline starts no chain,
// changes no member and is not verified, whatever its ref names: even a
// merge request whose source branch is the default branch (GitLab's hook
// names the source branch as ref). Where premerge does not cover the
// project it is ignored altogether.
func TestCandidateIsNeverARelease(t *testing.T) {
	t.Parallel()
	e := newValEnv(t, chain.PremergeRule{}, nil)
	iid, mrp := e.openMR("slim")
	e.succeed(mrp.ID)
	for _, tc := range []struct {
		project string
		id      int64
	}{{"g/base", mrp.ID}, {"g/ruby", mrp.ID + 1000}} {
		pid, _ := e.srv.Project(tc.project)
		ev := chain.PipelineEvent{ProjectID: pid.ID, Project: tc.project, PipelineID: tc.id, Status: "success", Ref: "main", SHA: mrp.SHA,
			Source: chain.SourceMergeRequest, URL: "https://x/p", At: e.clock.Now(),
			MergeRequest: &chain.MergeRequestRef{IID: iid, SourceBranch: "main", TargetBranch: "main"}}
		out, err := e.engine.ApplyPipelineEvent(e.ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, "started") || strings.Contains(out, "unblocked") {
			t.Errorf("%s's merge request pipeline: %q", tc.project, out)
		}
	}
	e.step()
	if chains, err := e.engine.Chains(e.ctx, chain.Filter{}); err != nil || len(chains) != 0 {
		t.Errorf("release chains %+v, %v: a candidate is never a release", chains, err)
	}
	if calls := e.verifier.calls(); len(calls) != 0 {
		t.Errorf("verified %v: a candidate changes no freshness", calls)
	}
	if v := e.mr(iid); v.ChainID == 0 {
		t.Errorf("merge request %+v: its candidate is validated", v)
	}
}

// TestValidationOnlyWithTheLabel: under label:, a merge request without
// it is not validated; once the label is added, the candidate already
// pushed is validated within the check interval.
func TestValidationOnlyWithTheLabel(t *testing.T) {
	t.Parallel()
	e := newValEnv(t, chain.PremergeRule{Label: "depsd::validate"}, nil)
	iid, mrp := e.openMR("slim")
	e.succeed(mrp.ID)
	e.step()
	if v := e.mr(iid); v.ChainID != 0 || len(e.validations("g/ruby")) != 0 || !strings.Contains(v.LastError, "depsd::validate") {
		t.Fatalf("merge request %+v: want it not validated without the label, saying so", v)
	}
	if _, n := e.note(iid); n != 0 {
		t.Errorf("%d notes on a merge request premerge does not validate", n)
	}
	code, _ := mrUpdate(t, e.srv, "g/base", iid, `{"add_labels":"depsd::validate"}`)
	if code != 200 {
		t.Fatalf("add label: %d", code)
	}
	e.clock.Advance(2 * time.Minute)
	e.step()
	if v := e.mr(iid); v.ChainID == 0 || len(e.validations("g/ruby")) != 1 {
		t.Fatalf("merge request %+v with the label: want it validated", v)
	}
}

// TestValidationOfABranchPipeline: a project without merge request
// pipelines: the success of a pipeline of the merge request's source
// branch, which pushed the candidate, is validated as the merge request's.
func TestValidationOfABranchPipeline(t *testing.T) {
	t.Parallel()
	e := newValEnv(t, chain.PremergeRule{}, nil)
	if err := e.srv.SetPipelineBehavior("g/base", gitlabtest.Behavior{OnPush: true}); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.CreateBranch("g/base", "slim"); err != nil {
		t.Fatal(err)
	}
	iid, err := e.srv.OpenMR("g/base", "slim", "main", "Slim")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.PushToMR("g/base", iid, "Containerfile", "FROM scratch\nRUN true\n"); err != nil {
		t.Fatal(err)
	}
	var branch gitlabtest.Pipeline
	for _, p := range e.srv.Pipelines("g/base") {
		if p.Ref == "slim" {
			branch = p
		}
	}
	cand := e.succeed(branch.ID)
	e.step()
	v := e.mr(iid)
	if v.ChainID == 0 || v.PipelineID != branch.ID {
		t.Fatalf("merge request %+v: want validated with pipeline %d", v, branch.ID)
	}
	if ps := e.validations("g/ruby"); len(ps) != 1 || !strings.Contains(ps[0].Variables[chain.VarBuildContexts], cand) {
		t.Errorf("ruby's validations %+v: want one on %s", ps, cand)
	}
}

// TestValidationSkipsAProjectWhoseCIWouldPublish: a dependent whose
// pipelines take variables but whose CI reads neither DEPSD_VALIDATE nor
// the build component would build on its usual base and publish: it
// cannot validate, and gets no pipeline.
func TestValidationSkipsAProjectWhoseCIWouldPublish(t *testing.T) {
	t.Parallel()
	e := newValEnv(t, chain.PremergeRule{}, nil)
	if _, err := e.srv.SetFile("g/python", ".gitlab-ci.yml", "build:\n  script: [make push]\n"); err != nil {
		t.Fatal(err)
	}
	_, mrp := e.openMR("slim")
	e.succeed(mrp.ID)
	e.step()
	if n := len(e.validations("g/python")); n != 0 {
		t.Errorf("python got %d validation pipelines", n)
	}
	if n := len(e.validations("g/ruby")); n != 1 {
		t.Errorf("ruby got %d validation pipelines, want 1", n)
	}
	v := e.mr(1)
	view, err := e.engine.Chain(e.ctx, v.ChainID)
	if err != nil {
		t.Fatal(err)
	}
	if m := member(view, "g/python"); m.State != chain.MemberSkipped || !strings.Contains(m.Why, "would publish") {
		t.Errorf("python %s: %s", m.State, m.Why)
	}
}

// mrUpdate sends PUT …/merge_requests/:iid with a JSON body.
func mrUpdate(t *testing.T, s *gitlabtest.Server, project string, iid int64, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("%s/projects/%s/merge_requests/%d", s.APIURL(), strings.ReplaceAll(project, "/", "%2F"), iid), strings.NewReader(body))
	req.Header.Set("PRIVATE-TOKEN", s.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

// TestValidationResendStillValidates: a validation build whose create
// failed (GitLab answered 502) is created again later as what it is: a
// validation, on the candidate, publishing nothing; never a release build.
func TestValidationResendStillValidates(t *testing.T) {
	t.Parallel()
	e := newValEnv(t, chain.PremergeRule{}, nil)
	_, mrp := e.openMR("slim")
	cand := e.succeed(mrp.ID)
	e.srv.Fail(gitlabtest.Fault{Endpoint: "POST /projects/:id/pipeline", Status: 502, Times: 3})
	for range 4 {
		e.step()
		e.clock.Advance(time.Minute)
	}
	for _, p := range []string{"g/ruby", "g/python"} {
		var api []gitlabtest.Pipeline
		for _, pl := range e.srv.Pipelines(p) {
			if pl.Source == "api" {
				api = append(api, pl)
			}
		}
		if len(api) != 1 || api[0].Variables[chain.VarValidate] != "1" || !strings.Contains(api[0].Variables[chain.VarBuildContexts], cand) {
			t.Errorf("%s: api pipelines %+v; want one validation on %s", p, api, cand)
		}
	}
}

// endedObserver counts the chains the engine says ended.
type endedObserver struct {
	mu    sync.Mutex
	ended int
}

func (o *endedObserver) EventApplied(string, string)  {}
func (o *endedObserver) PipelineCreated(string, bool) {}
func (o *endedObserver) ActionError(string, bool)     {}
func (o *endedObserver) CommitStatus(string, string)  {}
func (o *endedObserver) ChainEnded(chain.State, time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended++
}

// TestValidationIsNoChainEnded: a validation that finishes is not counted
// in depsd_chain_duration_seconds (the rebuilds' durations).
func TestValidationIsNoChainEnded(t *testing.T) {
	t.Parallel()
	e := newValEnv(t, chain.PremergeRule{}, nil)
	obs := &endedObserver{}
	e.cfg.Observer = obs
	e.engine = e.newEngine()
	iid, mrp := e.openMR("slim")
	e.succeed(mrp.ID)
	e.step()
	for _, p := range []string{"g/ruby", "g/python"} {
		e.endValidation(p, "success")
	}
	e.step()
	view, err := e.engine.Chain(e.ctx, e.mr(iid).ChainID)
	if err != nil || view.State != chain.Finished {
		t.Fatalf("validation %+v, %v: want finished", view.State, err)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.ended != 0 {
		t.Errorf("%d chains ended: a validation is no rebuild", obs.ended)
	}
}

// TestNoteClaimOfADeadSenderIsTakenOver: a note whose send a process
// claimed and then died in (its liveness lease gone, the claim's own
// lease still minutes away) is written by the next round, once, the
// earlier note found and edited, not left until the claim runs out.
func TestNoteClaimOfADeadSenderIsTakenOver(t *testing.T) {
	t.Parallel()
	e := newValEnv(t, chain.PremergeRule{}, nil)
	iid, mrp := e.openMR("slim")
	e.succeed(mrp.ID)
	e.step()
	if _, n := e.note(iid); n != 1 {
		t.Fatalf("%d notes before the claim", n)
	}
	v := e.mr(iid)
	// A dead process claimed the send of the next want (the ruby and
	// python pipelines' end) and died before it recorded anything.
	err := e.store.UpdateChains(e.ctx, func(tx chain.Tx) error {
		cur, _, err := tx.MRValidation(e.ctx, v.ProjectID, v.IID)
		if err != nil {
			return err
		}
		cur.Note.WantSeq++
		cur.Note.Want = strings.Replace(cur.Note.Want, "#### depsd:", "#### depsd (claimed):", 1)
		cur.Note.Doubt, cur.Note.NextSendAt = true, e.clock.Now()
		cur.Note.LeaseUntil, cur.Note.ClaimedBy = e.clock.Now().Add(5*time.Minute), "dead/1"
		return tx.SaveMRValidation(e.ctx, cur)
	})
	if err != nil {
		t.Fatal(err)
	}
	e.validate()
	body, n := e.note(iid)
	if n != 1 || !strings.Contains(body, "depsd (claimed):") {
		t.Errorf("%d notes, the last:\n%s\nwant the one note edited by the next round", n, body)
	}
	if got := e.mr(iid).Note; got.ClaimedBy != "" || got.DoneSeq != got.WantSeq {
		t.Errorf("note send %+v: want done, unclaimed", got)
	}
}

// TestValidationNoteNamesOnlyWhatTheMergeRequestsViewersSee: base is
// internal, python private. Everyone who sees base's merge request reads
// its status and note: python, which fails, is counted there, never
// named (chain/commitstatus.go's mayName); ruby, internal, is named.
func TestValidationNoteNamesOnlyWhatTheMergeRequestsViewersSee(t *testing.T) {
	t.Parallel()
	e := newValEnv(t, chain.PremergeRule{}, nil)
	for i := range e.projects {
		if e.projects[i].Path == "g/python" {
			e.projects[i].Visibility = "private"
		}
	}
	if err := e.store.ApplyScan(e.ctx, e.projects, scan.Meta{StartedAt: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	iid, mrp := e.openMR("slim")
	e.succeed(mrp.ID)
	e.step()
	e.endValidation("g/ruby", "success")
	e.endValidation("g/python", "failed")
	e.step()
	e.clock.Advance(time.Minute)
	e.step()
	s := e.shownStatus(mrp)
	body, _ := e.note(iid)
	if s.Status != "failed" || strings.Contains(s.Description, "python") || !strings.Contains(s.Description, "1 failed") {
		t.Errorf("status %+v: want failed, python counted, not named", s)
	}
	if strings.Contains(body, "python") || !strings.Contains(body, "| 1 project you may not see | **failed** |") || !strings.Contains(body, "g/ruby | built") {
		t.Errorf("note names python, or does not count it, or does not name ruby:\n%s", body)
	}
}
