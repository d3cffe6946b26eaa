package chain_test

import (
	"fmt"
	"net/http"
	"strings"
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

const (
	pinOld = "sha256:1f38c0d0a1f2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c"
	pinNew = "sha256:2a11e9f8d7c6b5a4938271605f4e3d2c1b0a99887766554433221100ffeeddcc"
	reg    = "registry.example.com"
)

// pinsEnv is a chain base → ruby → app → web where app pins ruby by
// digest (appFile), run by the engine against the fake GitLab through the
// real client: ruby's verified build published pinNew as ruby:3.
type pinsEnv struct {
	*glEnv
	verifier *fakeVerifier
}

// The Containerfile of g/app: an ARG default pins ruby:3, CRLF, a
// comment naming the old digest, and an external pin left alone.
const appFile = "# app: built on ruby, pinned for review\r\n" +
	"ARG RUBY=" + reg + "/g/ruby:3@" + pinOld + "\r\n" +
	"FROM docker.io/library/debian@" + pinOld + " AS tools\r\n" +
	"FROM ${RUBY}\r\n" +
	"# was " + pinOld + "\r\n" +
	"RUN make  \r\n"

func newPinsEnv(t *testing.T, cfg chain.Config) *pinsEnv {
	t.Helper()
	clk := &clock{t: time.Now().UTC()}
	srv := gitlabtest.New(gitlabtest.Options{Now: clk.Now})
	t.Cleanup(srv.Close)
	client, err := gitlab.New(gitlab.Config{BaseURL: srv.URL, Token: srv.Token, RequestsPerMinute: -1, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	path := storetest.State(t)
	s, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	files := map[string]string{
		"g/base": "FROM scratch\n",
		"g/ruby": "FROM " + reg + "/g/base:latest\n",
		"g/app":  appFile,
		"g/web":  "FROM " + reg + "/g/app:latest\n",
	}
	registry := deps.NewRegistryMap(map[string]string{reg + "/g/base": "g/base", reg + "/g/ruby": "g/ruby", reg + "/g/app": "g/app"})
	var projects []scan.Project
	for _, n := range []string{"g/app", "g/base", "g/ruby", "g/web"} {
		id, err := srv.AddProject(gitlabtest.Project{Path: n, Files: map[string]string{"Containerfile": files[n]}})
		if err != nil {
			t.Fatal(err)
		}
		a, err := deps.AnalyzeContainerfile("Containerfile", []byte(files[n]), deps.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range a.Dependencies {
			a.Dependencies[i].Project, _ = registry.Project(d.Repository)
		}
		projects = append(projects, scan.Project{ID: id, Path: n, DefaultBranch: "main", File: "Containerfile",
			Files: []scan.File{{Name: "Containerfile", Content: []byte(files[n])}}, Dependencies: a.Dependencies})
	}
	if err := s.ApplyScan(t.Context(), projects, scan.Meta{StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	// A project with a .gitlab-ci.yml: every push runs a pipeline,
	// left "created" until the test ends it.
	for _, n := range []string{"g/app", "g/base", "g/ruby", "g/web"} {
		if err := srv.SetPipelineBehavior(n, gitlabtest.Behavior{OnPush: true}); err != nil {
			t.Fatal(err)
		}
	}
	fresh := chain.Verification{State: chain.ImageFresh, Detail: "fresh"}
	v := newFakeVerifier(map[string][]chain.Verification{
		"g/base": {fresh},
		"g/ruby": {{State: chain.ImageFresh, Detail: "fresh", Images: map[string]string{reg + "/g/ruby:3": pinNew, reg + "/g/ruby:latest": pinNew}}},
		"g/app":  {fresh},
		"g/web":  {fresh},
	})
	cfg.Verifier = v
	g := &glEnv{t: t, ctx: t.Context(), srv: srv, client: client, store: s, path: path, clock: clk, cfg: cfg}
	g.engine = g.newEngine(s)
	return &pinsEnv{glEnv: g, verifier: v}
}

// verify applies the queued verifications.
func (p *pinsEnv) verify() {
	p.t.Helper()
	if _, err := p.engine.VerifyPending(p.ctx); err != nil {
		p.t.Fatal(err)
	}
}

// toApp runs the chain from a rebuild of base up to app's pin move sent.
func (p *pinsEnv) toApp() int64 {
	p.t.Helper()
	id, err := p.engine.Rebuild(p.ctx, "g/base", chain.Reason{Kind: chain.ReasonRebuild, Detail: "test"})
	if err != nil {
		p.t.Fatal(err)
	}
	p.send()
	p.end("g/base", "success")
	p.verify()
	p.send()
	p.end("g/ruby", "success")
	p.verify()
	p.send()
	return id
}

// deliver records a pipeline event of project as a webhook would.
func (p *pinsEnv) deliver(project string, pl gitlabtest.Pipeline, status string) {
	p.t.Helper()
	p.keys++
	ev := chain.PipelineEvent{ProjectID: pl.ProjectID, Project: project, PipelineID: pl.ID, Status: status, Ref: pl.Ref,
		SHA: pl.SHA, Source: pl.Source, Variables: pl.Variables, At: p.clock.Now()}
	if _, err := p.engine.RecordEvent(p.ctx, fmt.Sprintf("pins-%d", p.keys), chain.Event{Pipeline: &ev}); err != nil {
		p.t.Fatal(err)
	}
	if _, err := p.engine.ProcessInbox(p.ctx); err != nil {
		p.t.Fatal(err)
	}
}

// pipelinesOn lists project's pipelines on ref of source.
func (p *pinsEnv) pipelinesOn(project, ref, source string) []gitlabtest.Pipeline {
	var out []gitlabtest.Pipeline
	for _, pl := range p.srv.Pipelines(project) {
		if pl.Ref == ref && (source == "" || pl.Source == source) {
			out = append(out, pl)
		}
	}
	return out
}

func (p *pinsEnv) reconcilePins() int {
	p.t.Helper()
	n, err := p.engine.ReconcilePins(p.ctx)
	if err != nil {
		p.t.Fatal(err)
	}
	return n
}

// TestPinnedMemberGoesOnThroughItsMergeRequest: base → ruby → app → web,
// app pinning ruby:3 by digest in an ARG default. When ruby succeeded and
// its new image was verified, app is not rebuilt: one merge request moves
// its pin (only the digest, on depsd/pins; main untouched) and app waits
// for it. Merged by someone, the merge's own pipeline on main is app's
// build, counted once however often it is reported, and web is built once
// after it.
func TestPinnedMemberGoesOnThroughItsMergeRequest(t *testing.T) {
	t.Parallel()
	p := newPinsEnv(t, chain.Config{})
	id := p.toApp()
	v := p.states(id)
	app := member(v, "g/app")
	if app.State != chain.WaitingMerge || app.MergeRequest == "" || strings.Join(app.Pinned, ",") != "g/ruby" {
		t.Fatalf("app %+v: want waiting-merge with its merge request", app)
	}
	if n := len(p.pipelinesOn("g/app", "main", "api")); n != 0 {
		t.Fatalf("depsd created %d pipelines of app: a pinned member is not rebuilt", n)
	}
	mrs := p.srv.MergeRequests("g/app")
	if len(mrs) != 1 || mrs[0].SourceBranch != "depsd/pins" || mrs[0].TargetBranch != "main" || mrs[0].State != "opened" {
		t.Fatalf("merge requests of app: %+v", mrs)
	}
	for _, want := range []string{"g/ruby", pinOld, pinNew, "chain 1", reg + "/g/ruby:3"} {
		if !strings.Contains(mrs[0].Description, want) {
			t.Errorf("the description does not name %s:\n%s", want, mrs[0].Description)
		}
	}
	if got, want := p.srv.Files("g/app", "depsd/pins")["Containerfile"], strings.Replace(appFile, "g/ruby:3@"+pinOld, "g/ruby:3@"+pinNew, 1); got != want {
		t.Errorf("Containerfile on depsd/pins:\n%q\nwant only ruby's pin moved:\n%q", got, want)
	}
	if got := p.srv.Files("g/app", "main")["Containerfile"]; got != appFile {
		t.Errorf("main's Containerfile changed:\n%q", got)
	}
	if w := member(v, "g/web"); w.State != chain.Waiting {
		t.Errorf("web %s, want waiting for app", w.State)
	}
	if len(v.Writes) < 2 || v.Writes[0].Kind != "commit" || v.Writes[1].Kind != "merge-request" ||
		v.Writes[1].URL != app.MergeRequest || !strings.Contains(v.Writes[1].Detail, fmt.Sprintf("opened merge request !%d", mrs[0].IID)) {
		t.Errorf("writes of the chain: %+v", v.Writes)
	}

	// Reported before depsd saw the merge: the branch's pipelines are held.
	if n := p.reconcilePins(); n != 0 {
		t.Errorf("ReconcilePins moved %d members of an open merge request", n)
	}
	if err := p.srv.MergeMR("g/app", mrs[0].IID); err != nil {
		t.Fatal(err)
	}
	merged := p.srv.MergeRequests("g/app")[0]
	mergePipes := p.pipelinesOn("g/app", "main", "push")
	if len(mergePipes) != 1 || mergePipes[0].SHA != merged.MergeCommitSHA {
		t.Fatalf("pipelines of the merge on main: %+v (merge commit %s)", mergePipes, merged.MergeCommitSHA)
	}
	mp := mergePipes[0]
	if err := p.srv.SetPipelineStatus(mp.ID, "running"); err != nil {
		t.Fatal(err)
	}
	p.deliver("g/app", mp, "running")
	if err := p.srv.SetPipelineStatus(mp.ID, "success"); err != nil {
		t.Fatal(err)
	}
	p.deliver("g/app", mp, "success")
	if a := member(p.states(id), "g/app"); a.State != chain.WaitingMerge || a.Builds != 0 {
		t.Errorf("app %s after pipelines of main before depsd saw the merge: want still waiting-merge", a.State)
	}
	if n := p.reconcilePins(); n != 2 {
		t.Errorf("ReconcilePins moved %d, want 2 (the merge seen, its pipeline applied)", n)
	}
	if a := member(p.states(id), "g/app"); a.State != chain.Verifying || a.PipelineID != mp.ID || a.MergeSHA != merged.MergeCommitSHA {
		t.Fatalf("app %+v: want verifying the merge's pipeline %d", a, mp.ID)
	}
	// The success again (a webhook and its resend), and the reconcilers.
	p.deliver("g/app", mp, "success")
	p.deliver("g/app", mp, "success")
	p.reconcilePins()
	if _, err := p.engine.Reconcile(p.ctx); err != nil {
		t.Fatal(err)
	}
	p.verify()
	p.send()
	if n := len(p.pipelinesOn("g/web", "main", "api")); n != 1 {
		t.Fatalf("web built %d times, want once after app's merge", n)
	}
	p.end("g/web", "success")
	p.verify()
	v = p.states(id)
	if v.State != chain.Finished || states(v) != "g/app=success g/base=success g/ruby=success g/web=success" {
		t.Fatalf("chain %s: %s", v.State, states(v))
	}
	if a := member(v, "g/app"); a.Builds != 1 || a.PipelineID != mp.ID {
		t.Errorf("app %+v: want one build, the merge's pipeline", a)
	}
	if n := len(p.pipelinesOn("g/app", "main", "api")); n != 0 {
		t.Errorf("depsd created %d pipelines of app", n)
	}
	if n := len(p.srv.MergeRequests("g/app")); n != 1 {
		t.Errorf("%d merge requests of app, want 1", n)
	}
}

// TestClosedPinMergeRequestSkipsTheMember: closed unmerged, the member
// ends skipped with the reason, web (built on app alone) is skipped too,
// and the chain finishes; nothing of app or web is built.
func TestClosedPinMergeRequestSkipsTheMember(t *testing.T) {
	t.Parallel()
	p := newPinsEnv(t, chain.Config{})
	id := p.toApp()
	mrs := p.srv.MergeRequests("g/app")
	if len(mrs) != 1 {
		t.Fatalf("merge requests: %+v", mrs)
	}
	if err := p.srv.CloseMR("g/app", mrs[0].IID); err != nil {
		t.Fatal(err)
	}
	if n := p.reconcilePins(); n != 1 {
		t.Errorf("ReconcilePins moved %d, want 1", n)
	}
	v := p.states(id)
	if v.State != chain.Finished || states(v) != "g/app=skipped g/base=success g/ruby=success g/web=skipped" {
		t.Fatalf("chain %s: %s", v.State, states(v))
	}
	if why := member(v, "g/app").Why; !strings.Contains(why, "closed without being merged") || !strings.Contains(why, "g/ruby") {
		t.Errorf("app why %q", why)
	}
	p.send()
	for _, n := range []string{"g/app", "g/web"} {
		if got := len(p.pipelinesOn(n, "main", "api")); got != 0 {
			t.Errorf("%d pipelines of %s", got, n)
		}
	}
}

// TestPinMergeRequestTimesOut: not merged within pins.timeout, the member
// is skipped; the chain does not expire before (its expiry is shorter).
func TestPinMergeRequestTimesOut(t *testing.T) {
	t.Parallel()
	p := newPinsEnv(t, chain.Config{PinTimeout: 3 * time.Hour, Expiry: time.Hour})
	id := p.toApp()
	p.clock.Advance(2 * time.Hour)
	if _, err := p.engine.Reconcile(p.ctx); err != nil {
		t.Fatal(err)
	}
	p.reconcilePins()
	if v := p.states(id); v.State != chain.Running || member(v, "g/app").State != chain.WaitingMerge {
		t.Fatalf("after 2h (expiry 1h, pins.timeout 3h): chain %s, %s", v.State, states(v))
	}
	p.clock.Advance(time.Hour + time.Second)
	p.reconcilePins()
	v := p.states(id)
	if states(v) != "g/app=skipped g/base=success g/ruby=success g/web=skipped" {
		t.Fatalf("chain %s: %s", v.State, states(v))
	}
	if why := member(v, "g/app").Why; !strings.Contains(why, "not merged within 3h0m0s (pins.timeout)") {
		t.Errorf("app why %q", why)
	}
	if mrs := p.srv.MergeRequests("g/app"); mrs[0].State != "opened" {
		t.Errorf("the merge request was %s: depsd leaves it open", mrs[0].State)
	}
}

// TestPinsIgnoreSkipsWithoutAMergeRequest: pins: ignore for app: no merge
// request, app and web skipped with the reason.
func TestPinsIgnoreSkipsWithoutAMergeRequest(t *testing.T) {
	t.Parallel()
	p := newPinsEnv(t, chain.Config{Pins: chain.PinRules{Overrides: []chain.PinOverride{{Match: "g/app", Mode: chain.PinIgnore}}}})
	id := p.toApp()
	v := p.states(id)
	if v.State != chain.Finished || states(v) != "g/app=skipped g/base=success g/ruby=success g/web=skipped" {
		t.Fatalf("chain %s: %s", v.State, states(v))
	}
	if why := member(v, "g/app").Why; !strings.Contains(why, "pins: ignore") {
		t.Errorf("app why %q", why)
	}
	if mrs := p.srv.MergeRequests("g/app"); len(mrs) != 0 {
		t.Errorf("merge requests: %+v", mrs)
	}
}

// TestPinsAutoMerge: under auto-merge the merge request is set to merge
// when its pipeline succeeds (depsd's user is a Maintainer: a Developer
// may not merge into the protected main); GitLab merges it then, and the
// chain goes on through the merge's pipeline.
func TestPinsAutoMerge(t *testing.T) {
	t.Parallel()
	p := newPinsEnv(t, chain.Config{Pins: chain.PinRules{Default: chain.PinAutoMerge}})
	if err := p.srv.SetCISettings("g/app", gitlabtest.CISettings{TokenRole: gitlabtest.RoleMaintainer}); err != nil {
		t.Fatal(err)
	}
	id := p.toApp()
	mrs := p.srv.MergeRequests("g/app")
	if len(mrs) != 1 || !mrs[0].AutoMerge {
		t.Fatalf("merge request %+v: want set to merge when its pipeline succeeds", mrs)
	}
	branch := p.pipelinesOn("g/app", "depsd/pins", "push")
	if len(branch) != 1 {
		t.Fatalf("pipelines of depsd/pins: %+v", branch)
	}
	if err := p.srv.SetPipelineStatus(branch[0].ID, "success"); err != nil {
		t.Fatal(err)
	}
	if mr := p.srv.MergeRequests("g/app")[0]; mr.State != "merged" {
		t.Fatalf("merge request %s after its pipeline succeeded", mr.State)
	}
	p.reconcilePins()
	mp := p.pipelinesOn("g/app", "main", "push")
	if len(mp) != 1 {
		t.Fatalf("merge pipelines %+v", mp)
	}
	if err := p.srv.SetPipelineStatus(mp[0].ID, "success"); err != nil {
		t.Fatal(err)
	}
	p.deliver("g/app", mp[0], "success")
	p.verify()
	p.send()
	p.end("g/web", "success")
	p.verify()
	if v := p.states(id); v.State != chain.Finished || states(v) != "g/app=success g/base=success g/ruby=success g/web=success" {
		t.Fatalf("chain %s: %s", v.State, states(v))
	}
}

// TestPinsNothingToMove: main already pins ruby's new digest (moved by
// hand): app is built as any member, and the merge request an earlier
// chain opened is closed with a note.
func TestPinsNothingToMove(t *testing.T) {
	t.Parallel()
	p := newPinsEnv(t, chain.Config{})
	// An earlier chain's merge request, still open.
	info, _ := p.srv.Project("g/app")
	if _, err := p.client.CreateCommit(p.ctx, info.ID, gitlab.CommitRequest{Branch: "depsd/pins", StartBranch: "main",
		Message: "old move", Actions: []gitlab.CommitAction{{Action: gitlab.ActionUpdate, Path: "Containerfile", Content: "FROM scratch\n"}}}); err != nil {
		t.Fatal(err)
	}
	old, err := p.client.CreateMergeRequest(p.ctx, info.ID, gitlab.NewMergeRequest{SourceBranch: "depsd/pins", TargetBranch: "main", Title: "old"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.srv.SetFileOn("g/app", "main", "Containerfile", strings.ReplaceAll(appFile, "g/ruby:3@"+pinOld, "g/ruby:3@"+pinNew)); err != nil {
		t.Fatal(err)
	}
	id := p.toApp()
	p.send()
	v := p.states(id)
	if a := member(v, "g/app"); a.State != chain.Triggered || a.Builds != 1 {
		t.Fatalf("app %+v: want built", a)
	}
	mr := p.srv.MergeRequests("g/app")[0]
	noted := false
	for _, n := range mr.Notes {
		noted = noted || !n.System && strings.Contains(n.Body, "no longer moves anything")
	}
	if mr.IID != old.IID || mr.State != "closed" || !noted {
		t.Errorf("the earlier merge request: %+v", mr)
	}
}

// TestPinsRefusedWhereTheTokenCannotPush: a token whose user is only a
// Reporter of the pinned project fails the member with the role it needs.
func TestPinsRefusedWhereTheTokenCannotPush(t *testing.T) {
	t.Parallel()
	p := newPinsEnv(t, chain.Config{})
	u, err := p.srv.AddUser("depsd-bot")
	if err != nil {
		t.Fatal(err)
	}
	for path, level := range map[string]int{"g/base": gitlabtest.AccessDeveloper, "g/ruby": gitlabtest.AccessDeveloper,
		"g/web": gitlabtest.AccessDeveloper, "g/app": gitlabtest.AccessReporter} {
		if err := p.srv.AddMember(path, u.Username, level); err != nil {
			t.Fatal(err)
		}
	}
	if p.client, err = gitlab.New(gitlab.Config{BaseURL: p.srv.URL, Token: u.Token, RequestsPerMinute: -1, MaxRetries: -1}); err != nil {
		t.Fatal(err)
	}
	p.engine = p.newEngine(p.store)
	id := p.toApp()
	v := p.states(id)
	a := member(v, "g/app")
	if a.State != chain.Failed || !strings.Contains(a.Why, "Developer role") {
		t.Fatalf("app %+v: want failed, naming the role depsd needs", a)
	}
	if mrs := p.srv.MergeRequests("g/app"); len(mrs) != 0 {
		t.Errorf("merge requests %+v", mrs)
	}
}

// TestPinsNeverWriteAProtectedBranch: depsd/pins protected (a rule
// matching it): nothing is written, the member fails saying why.
func TestPinsNeverWriteAProtectedBranch(t *testing.T) {
	t.Parallel()
	p := newPinsEnv(t, chain.Config{})
	if err := p.srv.CreateBranch("g/app", "depsd/pins"); err != nil {
		t.Fatal(err)
	}
	if err := p.srv.ProtectBranch("g/app", "depsd/*", gitlabtest.Protection{}); err != nil {
		t.Fatal(err)
	}
	head := p.srv.Files("g/app", "depsd/pins")["Containerfile"]
	id := p.toApp()
	a := member(p.states(id), "g/app")
	if a.State != chain.Failed || !strings.Contains(a.Why, "protected") {
		t.Fatalf("app %+v", a)
	}
	if got := p.srv.Files("g/app", "depsd/pins")["Containerfile"]; got != head {
		t.Errorf("the protected branch was written")
	}
}

// TestPinsALaterChainUpdatesTheSameMergeRequest: ruby is rebuilt again
// while app's merge request is open: app waits again, and once ruby's
// newer image is verified the same branch and merge request move the pin
// to it (one merge request, its description and file updated).
func TestPinsALaterChainUpdatesTheSameMergeRequest(t *testing.T) {
	t.Parallel()
	const newer = "sha256:3c22aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	p := newPinsEnv(t, chain.Config{})
	p.verifier.answers["g/ruby"] = append(p.verifier.answers["g/ruby"],
		chain.Verification{State: chain.ImageFresh, Images: map[string]string{reg + "/g/ruby:3": newer}})
	id := p.toApp()
	first := p.srv.MergeRequests("g/app")
	if len(first) != 1 {
		t.Fatalf("merge requests %+v", first)
	}
	if again, err := p.engine.Rebuild(p.ctx, "g/ruby", chain.Reason{Kind: chain.ReasonRebuild, Detail: "again"}); err != nil || again != id {
		t.Fatalf("rebuild of ruby: chain %d, %v; want merged into %d", again, err, id)
	}
	if a := member(p.states(id), "g/app"); a.State != chain.Waiting {
		t.Errorf("app %s after ruby changed again, want waiting", a.State)
	}
	p.send()
	p.end("g/ruby", "success")
	p.verify()
	p.send()
	mrs := p.srv.MergeRequests("g/app")
	if len(mrs) != 1 || mrs[0].IID != first[0].IID || mrs[0].State != "opened" || !strings.Contains(mrs[0].Description, newer) {
		t.Fatalf("merge requests %+v: want the same one, moving to %s", mrs, newer)
	}
	if got := p.srv.Files("g/app", "depsd/pins")["Containerfile"]; !strings.Contains(got, "g/ruby:3@"+newer) || strings.Contains(got, pinNew) {
		t.Errorf("depsd/pins holds:\n%s", got)
	}
	if a := member(p.states(id), "g/app"); a.State != chain.WaitingMerge || a.MergeRequest == "" {
		t.Errorf("app %+v", a)
	}
}

// TestPinnedMemberWaitsForItsOtherUpstreams: app pins ruby and is built
// from tools too (unpinned); base → {ruby, tools} → app. app's merge
// request is opened only once both succeeded.
func TestPinnedMemberWaitsForItsOtherUpstreams(t *testing.T) {
	t.Parallel()
	p := newPinsEnv(t, chain.Config{})
	// tools joins: FROM base, and app copies from it.
	if _, err := p.srv.AddProject(gitlabtest.Project{Path: "g/tools", Files: map[string]string{"Containerfile": "FROM scratch\n"}}); err != nil {
		t.Fatal(err)
	}
	info, _ := p.srv.Project("g/tools")
	ps, err := p.store.Projects(p.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ps {
		if ps[i].Path == "g/app" {
			ps[i].Dependencies = append(ps[i].Dependencies, deps.Dependency{Kind: deps.KindCopyFrom, Line: 7, Image: reg + "/g/tools:latest",
				Repository: reg + "/g/tools", Tag: "latest", Project: "g/tools"})
		}
	}
	ps = append(ps, scan.Project{ID: info.ID, Path: "g/tools", DefaultBranch: "main", Dependencies: []deps.Dependency{{Kind: deps.KindGitLabDeps, Ref: "g/base", Project: "g/base"}}})
	if err := p.store.ApplyScan(p.ctx, ps, scan.Meta{StartedAt: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	p.verifier.answers["g/tools"] = []chain.Verification{{State: chain.ImageFresh}}
	id, err := p.engine.Rebuild(p.ctx, "g/base", chain.Reason{Kind: chain.ReasonRebuild})
	if err != nil {
		t.Fatal(err)
	}
	p.send()
	p.end("g/base", "success")
	p.verify()
	p.send()
	p.end("g/ruby", "success")
	p.verify()
	p.send()
	if a := member(p.states(id), "g/app"); a.State != chain.Waiting || a.Why != "waiting for g/tools" {
		t.Fatalf("app %+v: want waiting for tools before its merge request", a)
	}
	if n := len(p.srv.MergeRequests("g/app")); n != 0 {
		t.Fatalf("%d merge requests before tools succeeded", n)
	}
	p.end("g/tools", "success")
	p.verify()
	p.send()
	if a := member(p.states(id), "g/app"); a.State != chain.WaitingMerge || len(p.srv.MergeRequests("g/app")) != 1 {
		t.Fatalf("app %+v: want waiting for its merge request once both upstreams succeeded", a)
	}
}

// TestPinsOnAMaintenanceBranch: app's maintenance branch stable is a node
// of its own (refs:), pinning ruby as main does: its merge request comes
// from depsd/pins-stable and targets stable, and its merge's pipeline on
// stable is that node's build.
func TestPinsOnAMaintenanceBranch(t *testing.T) {
	t.Parallel()
	p := newPinsEnv(t, chain.Config{})
	if err := p.srv.CreateBranch("g/app", "stable"); err != nil {
		t.Fatal(err)
	}
	ps, err := p.store.Projects(p.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ps {
		if ps[i].Path == "g/app" {
			ps[i].Refs = []scan.Ref{{Node: "g/app@stable", Kind: deps.NodeBranch, Ref: "stable", File: "Containerfile",
				Files: ps[i].Files, Dependencies: ps[i].Dependencies}}
		}
	}
	if err := p.store.ApplyScan(p.ctx, ps, scan.Meta{StartedAt: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	id := p.toApp()
	var stable gitlabtest.MergeRequest
	for _, mr := range p.srv.MergeRequests("g/app") {
		if mr.TargetBranch == "stable" {
			stable = mr
		}
	}
	if stable.SourceBranch != "depsd/pins-stable" || len(p.srv.MergeRequests("g/app")) != 2 {
		t.Fatalf("merge requests of app: %+v; want one into main and one from depsd/pins-stable into stable", p.srv.MergeRequests("g/app"))
	}
	if err := p.srv.MergeMR("g/app", stable.IID); err != nil {
		t.Fatal(err)
	}
	p.reconcilePins()
	var merged gitlabtest.MergeRequest
	for _, mr := range p.srv.MergeRequests("g/app") {
		if mr.IID == stable.IID {
			merged = mr
		}
	}
	var mp gitlabtest.Pipeline
	for _, pl := range p.pipelinesOn("g/app", "stable", "push") {
		if pl.SHA == merged.MergeCommitSHA {
			mp = pl
		}
	}
	if mp.ID == 0 {
		t.Fatalf("no pipeline of the merge on stable")
	}
	if err := p.srv.SetPipelineStatus(mp.ID, "success"); err != nil {
		t.Fatal(err)
	}
	p.deliver("g/app", mp, "success")
	v := p.states(id)
	if a := member(v, "g/app@stable"); (a.State != chain.Verifying && a.State != chain.Success) || a.PipelineID != mp.ID {
		t.Fatalf("g/app@stable %+v: want built by the merge's pipeline on stable", a)
	}
	if a := member(v, "g/app"); a.State != chain.WaitingMerge {
		t.Errorf("g/app (main) %s: its own merge request is still open", a.State)
	}
}

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestPinsReReadAFileChangedMeanwhile: someone changes app's Containerfile
// on main between depsd's read and its commit: GitLab refuses the commit
// (last_commit_id), depsd reads the file again and moves the pin in what
// main holds now, once; changed again at each try, it gives up for now and
// tries later.
func TestPinsReReadAFileChangedMeanwhile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		changes int // commits made under depsd's feet
	}{{"once", 1}, {"at each try", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPinsEnv(t, chain.Config{})
			commits, changed := 0, 0
			hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/repository/commits") {
					commits++
					if changed < tc.changes {
						changed++
						if _, err := p.srv.SetFileOn("g/app", "main", "Containerfile", fmt.Sprintf("# edited %d\n", changed)+appFile); err != nil {
							t.Error(err)
						}
					}
				}
				return http.DefaultTransport.RoundTrip(r)
			})}
			var err error
			if p.client, err = gitlab.New(gitlab.Config{BaseURL: p.srv.URL, Token: p.srv.Token, RequestsPerMinute: -1, MaxRetries: -1, HTTPClient: hc}); err != nil {
				t.Fatal(err)
			}
			p.engine = p.newEngine(p.store)
			id := p.toApp()
			a := member(p.states(id), "g/app")
			switch tc.changes {
			case 1:
				want := "# edited 1\n" + strings.Replace(appFile, "g/ruby:3@"+pinOld, "g/ruby:3@"+pinNew, 1)
				if got := p.srv.Files("g/app", "depsd/pins")["Containerfile"]; a.State != chain.WaitingMerge || commits != 2 || got != want {
					t.Fatalf("app %s after %d commits; depsd/pins holds:\n%q\nwant main's new file with the pin moved:\n%q", a.State, commits, got, want)
				}
			case 2:
				if a.State != chain.WaitingMerge || a.MergeRequest != "" || commits != 2 || !strings.Contains(a.Why, "changed on main of g/app while its pins were moved, twice") {
					t.Fatalf("app %+v after %d commits: want still waiting, the move retried later", a, commits)
				}
				// Later, nobody in the way: the move goes through.
				p.clock.Advance(time.Minute)
				p.send()
				if a := member(p.states(id), "g/app"); a.MergeRequest == "" || commits != 3 {
					t.Fatalf("app %+v after %d commits: want its merge request", a, commits)
				}
			}
		})
	}
}

// TestPinnedMemberOfAPushedRoot: a developer's push to ruby starts the
// chain (ruby is its root, built already): app, pinning ruby, waits for
// ruby's image to be verified, whose digest its pin moves to, then gets
// its merge request.
func TestPinnedMemberOfAPushedRoot(t *testing.T) {
	t.Parallel()
	p := newPinsEnv(t, chain.Config{})
	plID, err := p.srv.RunPipeline("g/ruby", "main", "push")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.srv.SetPipelineStatus(plID, "success"); err != nil {
		t.Fatal(err)
	}
	var pl gitlabtest.Pipeline
	for _, x := range p.srv.Pipelines("g/ruby") {
		if x.ID == plID {
			pl = x
		}
	}
	p.deliver("g/ruby", pl, "success")
	cs, err := p.engine.Chains(p.ctx, chain.Filter{})
	if err != nil || len(cs) != 1 {
		t.Fatalf("chains %+v, %v", cs, err)
	}
	id := cs[0].ID
	if a := member(p.states(id), "g/app"); a.State != chain.Waiting || !strings.Contains(a.Why, "verified") {
		t.Fatalf("app %+v: want waiting for ruby's image to be verified", a)
	}
	p.verify()
	p.send()
	if a := member(p.states(id), "g/app"); a.State != chain.WaitingMerge || a.MergeRequest == "" {
		t.Fatalf("app %+v: want its merge request once ruby's image was verified", a)
	}
	if mrs := p.srv.MergeRequests("g/app"); len(mrs) != 1 || !strings.Contains(mrs[0].Description, pinNew) {
		t.Errorf("merge requests %+v", mrs)
	}
}
