package chain_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/webhook"
)

// statusEnv is a glEnv whose engine keeps the chains' commit statuses,
// with a hook on every project: deliver applies the Pipeline Hooks GitLab
// sent, as depsd's receiver would, so that what a status does to the
// root's pipeline comes back to the engine as it would for real.
type statusEnv struct {
	*glEnv
	delivered int // deliveries applied so far
	outcomes  []string
}

func newStatusEnv(t *testing.T, edges ...string) *statusEnv {
	t.Helper()
	g := newGitLabEnvWith(t, glOptions{visibility: "internal", cfg: chain.Config{Statuses: &chain.ChainStatusOptions{
		ChainURL: func(id int64) string { return fmt.Sprintf("https://depsd.example.com/chains/%d", id) },
	}}}, edges...)
	recv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(recv.Close)
	for _, p := range g.srv.Projects() {
		if _, err := g.srv.AddHook(p, gitlabtest.Hook{URL: recv.URL, Events: []string{"pipeline_events"}}); err != nil {
			t.Fatal(err)
		}
	}
	return &statusEnv{glEnv: g}
}

// root runs a developer's pipeline of project to success and returns it.
func (g *statusEnv) root(project string) gitlabtest.Pipeline {
	g.t.Helper()
	id, err := g.srv.AddPipeline(project, "main", "push", "success")
	if err != nil {
		g.t.Fatal(err)
	}
	for _, p := range g.srv.Pipelines(project) {
		if p.ID == id {
			return p
		}
	}
	g.t.Fatalf("pipeline %d of %s not found", id, project)
	return gitlabtest.Pipeline{}
}

// deliver applies the Pipeline Hooks sent since the last call, in order,
// and remembers the outcomes the inbox recorded.
func (g *statusEnv) deliver() {
	g.t.Helper()
	ds := g.srv.Deliveries()
	for _, d := range ds[g.delivered:] {
		ev, err := webhook.Decode(d.Event, d.Payload, nil, nil, nil, time.Now())
		if err != nil {
			continue // ignored by the receiver too
		}
		if _, err := g.engine.RecordEvent(g.ctx, d.IdempotencyKey, chain.Event{Pipeline: ev.Pipeline, Push: ev.Push}); err != nil {
			g.t.Fatal(err)
		}
	}
	g.delivered = len(ds)
	if _, err := g.engine.ProcessInbox(g.ctx); err != nil {
		g.t.Fatal(err)
	}
}

// finish moves project's newest pipeline to status on GitLab and applies
// the hooks that sends.
func (g *statusEnv) finish(project, status string) {
	g.t.Helper()
	ps := g.srv.Pipelines(project)
	if len(ps) == 0 {
		g.t.Fatalf("no pipeline for %s", project)
	}
	if err := g.srv.SetPipelineStatus(ps[len(ps)-1].ID, status); err != nil {
		g.t.Fatal(err)
	}
	g.deliver()
}

// sendStatuses runs the status sender once and returns how many posts
// GitLab accepted.
func (g *statusEnv) sendStatuses() int {
	g.t.Helper()
	n, err := g.engine.SendStatuses(g.ctx)
	if err != nil {
		g.t.Fatal(err)
	}
	return n
}

// shown is depsd's status on the root pipeline as GitLab shows it: the
// newest of its name on that pipeline ("" state when there is none).
func (g *statusEnv) shown(project string, root gitlabtest.Pipeline) gitlabtest.CommitStatus {
	g.t.Helper()
	var out gitlabtest.CommitStatus
	for _, s := range g.srv.Statuses(project, root.SHA) {
		if s.Name != chain.StatusName {
			continue
		}
		if s.PipelineID != root.ID || s.Ref != root.Ref {
			g.t.Errorf("status %+v is not on the root pipeline %d (%s)", s, root.ID, root.Ref)
		}
		out = s
	}
	return out
}

// history is the states depsd's statuses on a commit went through, oldest
// first (each post that moved a status or made a new one).
func (g *statusEnv) posts() int64 { return g.srv.Requests("POST /projects/:id/statuses/:sha") }

func (g *statusEnv) pipelineStatus(id int64) string {
	g.t.Helper()
	p, err := g.client.GetPipeline(g.ctx, g.srv.Pipelines("g/base")[0].ProjectID, id)
	if err != nil {
		g.t.Fatal(err)
	}
	return p.Status
}

func (g *statusEnv) chainCount() int {
	g.t.Helper()
	cs, err := g.engine.Chains(g.ctx, chain.Filter{})
	if err != nil {
		g.t.Fatal(err)
	}
	return len(cs)
}

// hooked reports whether GitLab sent a Pipeline Hook for pipeline with
// status, times over.
func (g *statusEnv) hooked(pipelineID int64, status string) int {
	g.t.Helper()
	n := 0
	for _, d := range g.srv.Deliveries() {
		ev, err := webhook.Decode(d.Event, d.Payload, nil, nil, nil, time.Now())
		if err == nil && ev.Pipeline != nil && ev.Pipeline.PipelineID == pipelineID && ev.Pipeline.Status == status {
			n++
		}
	}
	return n
}

func (g *statusEnv) noRefusals() {
	g.t.Helper()
	if n := g.srv.RefusedStatusTransitions(); n != 0 {
		g.t.Errorf("GitLab refused %d status transitions", n)
	}
}

// The status on the commit whose success started a chain moves as the
// chain moves: pending, running, success, with the chain's link and its
// progress, on the root's own pipeline. The Pipeline Hooks that the
// status makes GitLab send for the root's pipeline (running again, then
// success again) start nothing and count nothing.
func TestChainStatusFollowsTheChain(t *testing.T) {
	t.Parallel()
	g := newStatusEnv(t, "base>app", "app>web")
	root := g.root("g/base")
	g.deliver()
	if n := g.chainCount(); n != 1 {
		t.Fatalf("%d chains after the root's success", n)
	}
	if n := g.sendStatuses(); n != 1 {
		t.Fatalf("posted %d statuses, want 1", n)
	}
	s := g.shown("g/base", root)
	if s.Status != "pending" || s.TargetURL != "https://depsd.example.com/chains/1" || s.Description != "0 of 2 rebuilt, 1 building" {
		t.Fatalf("status = %+v", s)
	}
	// The pending status made the finished root pipeline run again.
	if st := g.pipelineStatus(root.ID); st != "running" {
		t.Errorf("root pipeline %s, want running under a pending status", st)
	}
	g.deliver()
	g.send()
	g.deliver()
	if n := g.sendStatuses(); n != 0 {
		t.Fatalf("posted %d within the interval", n)
	}
	g.clock.Advance(5 * time.Second)
	if n := g.sendStatuses(); n != 1 {
		t.Fatalf("posted %d after the interval, want 1", n)
	}
	if s := g.shown("g/base", root); s.Status != "running" {
		t.Fatalf("status = %+v, want running", s)
	}
	g.finish("g/app", "success")
	g.send()
	g.finish("g/web", "success")
	g.deliver()
	if v := g.states(1); v.State != chain.Finished {
		t.Fatalf("chain %s: %s", v.State, states(v))
	}
	g.clock.Advance(5 * time.Second)
	g.sendStatuses()
	s = g.shown("g/base", root)
	if s.Status != "success" || s.Description != "2 of 2 rebuilt" {
		t.Fatalf("status = %+v", s)
	}
	g.deliver()
	if st := g.pipelineStatus(root.ID); st != "success" {
		t.Errorf("root pipeline %s, want success again", st)
	}
	if n := g.hooked(root.ID, "success"); n != 2 {
		t.Fatalf("%d Pipeline Hooks of the root's success, want 2 (its own, and after depsd's status)", n)
	}
	// The root's pipeline reported running, then success, a second time:
	// one chain, its members built once, no pipeline of the root.
	if n := g.chainCount(); n != 1 {
		t.Errorf("%d chains, want 1", n)
	}
	v := g.states(1)
	for _, p := range []string{"g/app", "g/web"} {
		if m := member(v, p); m.Builds != 1 || m.State != chain.Success {
			t.Errorf("%s = %+v", p, m)
		}
	}
	if n := len(g.srv.Pipelines("g/base")); n != 1 {
		t.Errorf("%d pipelines of the root, want its own only", n)
	}
	if n := g.sendStatuses(); n != 0 {
		t.Errorf("posted %d once everything was shown", n)
	}
	g.noRefusals()
}

// A failed member fails the status, naming it; GitLab then fails the
// root's pipeline, and its Pipeline Hook says so: depsd does not take that
// for a failure of the root (nothing is blocked, requeued or started). A
// later success of the failed project resumes the chain: the status runs
// again (a new status: the failed one is final) and succeeds.
func TestChainStatusOfABlockedChain(t *testing.T) {
	t.Parallel()
	g := newStatusEnv(t, "base>app", "app>web")
	root := g.root("g/base")
	g.deliver()
	g.send()
	g.finish("g/app", "failed")
	g.deliver()
	if v := g.states(1); v.State != chain.Blocked {
		t.Fatalf("chain %s: %s", v.State, states(v))
	}
	g.sendStatuses()
	s := g.shown("g/base", root)
	if s.Status != "failed" || s.Description != "0 of 2 rebuilt, 1 failed: g/app, 1 blocked" {
		t.Fatalf("status = %+v", s)
	}
	if st := g.pipelineStatus(root.ID); st != "failed" {
		t.Fatalf("root pipeline %s, want failed under a failed status", st)
	}
	if n := g.hooked(root.ID, "failed"); n != 1 {
		t.Fatalf("%d Pipeline Hooks of the root's pipeline failing, want 1", n)
	}
	g.deliver()
	v := g.states(1)
	if v.State != chain.Blocked || states(v) != "g/app=failed g/base=success g/web=blocked" {
		t.Fatalf("after the root's pipeline failed on GitLab: chain %s: %s", v.State, states(v))
	}
	if n, err := g.engine.SendPending(g.ctx); err != nil || n != 0 {
		t.Fatalf("SendPending = %d, %v: the root's failure queued work", n, err)
	}
	if n := g.chainCount(); n != 1 {
		t.Fatalf("%d chains", n)
	}

	// A retry of app succeeds: the chain resumes.
	if _, err := g.srv.AddPipeline("g/app", "main", "web", "success"); err != nil {
		t.Fatal(err)
	}
	g.deliver()
	g.send()
	g.clock.Advance(5 * time.Second)
	g.sendStatuses()
	if s := g.shown("g/base", root); s.Status != "running" {
		t.Fatalf("status = %+v, want running again", s)
	}
	g.deliver()
	g.finish("g/web", "success")
	g.deliver()
	g.clock.Advance(5 * time.Second)
	g.sendStatuses()
	if s := g.shown("g/base", root); s.Status != "success" || s.Description != "2 of 2 rebuilt" {
		t.Fatalf("status = %+v", s)
	}
	g.deliver()
	if st := g.pipelineStatus(root.ID); st != "success" {
		t.Errorf("root pipeline %s, want success", st)
	}
	if n := g.chainCount(); n != 1 {
		t.Errorf("%d chains, want 1", n)
	}
	g.noRefusals()
}

// The changes of a chain between two posts are one post: a chain that
// starts and finishes within the interval posts pending and success, and
// a blocked chain whose members fail one after another posts its failures
// together.
func TestChainStatusIsCoalesced(t *testing.T) {
	t.Parallel()
	edges := []string{}
	for i := range 8 {
		edges = append(edges, fmt.Sprintf("base>a%d", i))
	}
	g := newStatusEnv(t, edges...)
	root := g.root("g/base")
	g.deliver()
	g.sendStatuses()
	g.send()
	g.deliver()
	for i := range 8 {
		g.finish(fmt.Sprintf("g/a%d", i), "failed")
		g.sendStatuses()
		g.deliver()
	}
	if n := g.posts(); n != 1 {
		t.Errorf("%d posts within the interval, want 1 (pending)", n)
	}
	g.clock.Advance(5 * time.Second)
	g.sendStatuses()
	s := g.shown("g/base", root)
	if s.Status != "failed" || !strings.HasPrefix(s.Description, "0 of 8 rebuilt, 8 failed: g/a0, g/a1,") {
		t.Fatalf("status = %+v", s)
	}
	if n := g.posts(); n != 2 {
		t.Errorf("%d posts, want 2 (pending, then failed with every failure)", n)
	}
	g.noRefusals()
}

// Without statuses (gitlab.commit_status: off) a chain sends no status
// request at all.
func TestChainStatusOff(t *testing.T) {
	t.Parallel()
	g := newGitLabEnv(t, nil, "base>app")
	if _, err := g.srv.AddPipeline("g/base", "main", "push", "success"); err != nil {
		t.Fatal(err)
	}
	p := g.srv.Pipelines("g/base")[0]
	ev := chain.PipelineEvent{ProjectID: p.ProjectID, Project: "g/base", PipelineID: p.ID, Status: "success", Ref: "main", SHA: p.SHA, Source: "push"}
	if _, err := g.engine.ApplyPipelineEvent(g.ctx, ev); err != nil {
		t.Fatal(err)
	}
	if n, err := g.engine.SendStatuses(g.ctx); n != 0 || err != nil {
		t.Fatalf("SendStatuses = %d, %v", n, err)
	}
	g.send()
	g.end("g/app", "success")
	for _, ep := range []string{"POST /projects/:id/statuses/:sha", "GET /projects/:id/repository/commits/:sha/statuses"} {
		if n := g.srv.Requests(ep); n != 0 {
			t.Errorf("%d requests %s", n, ep)
		}
	}
}

// A sender that dies after its claim, or after GitLab accepted its post
// and before the outcome is recorded, leaves the status in doubt: the
// next sender reads what GitLab shows and goes on from there. Nothing is
// posted twice that GitLab would refuse, and the status ends as the chain
// does.
func TestChainStatusAcrossCrashes(t *testing.T) {
	t.Parallel()
	for _, crashAt := range []string{"claimed", "posted"} {
		t.Run(crashAt, func(t *testing.T) {
			g := newStatusEnv(t, "base>app")
			root := g.root("g/base")
			g.deliver()
			crashCtx, crash := context.WithCancel(g.ctx)
			hook := func(chain.ChainStatus) { crash() }
			if crashAt == "claimed" {
				chain.SetStatusHooks(g.engine, hook, nil)
			} else {
				chain.SetStatusHooks(g.engine, nil, hook)
			}
			if _, err := g.engine.SendStatuses(crashCtx); err == nil {
				t.Fatal("SendStatuses survived the crash")
			}
			want := map[string]string{"claimed": "", "posted": "pending"}[crashAt]
			if s := g.shown("g/base", root); s.Status != want {
				t.Fatalf("after the crash GitLab shows %q, want %q", s.Status, want)
			}
			// A new process on the same state, once the dead claim's
			// lease ran out.
			s2, err := store.Open(g.ctx, g.path)
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			g.engine = g.newEngine(s2)
			g.clock.Advance(6 * time.Minute)
			g.sendStatuses()
			if s := g.shown("g/base", root); s.Status != "pending" {
				t.Fatalf("status = %+v, want pending", s)
			}
			g.deliver()
			g.send()
			g.finish("g/app", "success")
			g.deliver()
			g.clock.Advance(5 * time.Second)
			g.sendStatuses()
			if s := g.shown("g/base", root); s.Status != "success" {
				t.Fatalf("status = %+v, want success", s)
			}
			if n := g.posts(); n != 2 {
				t.Errorf("%d posts, want 2 (pending once, success)", n)
			}
			g.noRefusals()
		})
	}
}

// A failure of a project the root's viewers may not see is counted, not
// named: a public base's status does not tell the world the names of
// private projects built on it.
func TestChainStatusNamesOnlyWhatTheRootsViewersSee(t *testing.T) {
	t.Parallel()
	g := newStatusEnv(t, "base>app", "base>shop")
	// As scanned: the base is public, the shop private, the app internal.
	ps, err := g.store.Projects(g.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ps {
		ps[i].Visibility = map[string]string{"g/base": "public", "g/app": "public", "g/shop": "private"}[ps[i].Path]
	}
	if err := g.store.ApplyScan(g.ctx, ps, scan.Meta{StartedAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	root := g.root("g/base")
	g.deliver()
	g.send()
	g.finish("g/app", "failed")
	g.finish("g/shop", "failed")
	g.sendStatuses()
	if s := g.shown("g/base", root); s.Status != "failed" || s.Description != "0 of 2 rebuilt, 2 failed: g/app and 1 more" {
		t.Fatalf("status = %+v", s)
	}
}

// In first-level mode a success of depsd's own pipeline starts a chain
// too, so the status lands on a pipeline depsd created: the Pipeline
// Hooks it causes there (running, then failed when a dependent failed)
// leave the earlier chain whose member that pipeline built as it was.
func TestChainStatusFirstLevelOnDepsdsPipeline(t *testing.T) {
	t.Parallel()
	g := newStatusEnv(t, "base>app", "app>web")
	cfg := g.cfg
	cfg.Mode = chain.FirstLevel
	cfg.Statuses = &chain.ChainStatusOptions{}
	g.cfg = cfg
	g.engine = g.newEngine(g.store)
	g.root("g/base")
	g.deliver()
	g.send()
	g.finish("g/app", "success") // chain 1 finished; chain 2 starts at app's pipeline
	g.deliver()
	app := g.srv.Pipelines("g/app")[0]
	g.sendStatuses()
	g.deliver()
	g.send()
	g.finish("g/web", "failed")
	g.deliver()
	g.clock.Advance(5 * time.Second)
	g.sendStatuses()
	if s := g.shown("g/app", app); s.Status != "failed" {
		t.Fatalf("status on app's pipeline = %+v", s)
	}
	if n := g.hooked(app.ID, "failed"); n != 1 {
		t.Fatalf("%d Pipeline Hooks of app's pipeline failing, want 1", n)
	}
	g.deliver()
	if _, err := g.engine.Reconcile(g.ctx); err != nil {
		t.Fatal(err)
	}
	if v := g.states(1); v.State != chain.Finished || states(v) != "g/app=success" {
		t.Errorf("chain 1 %s: %s", v.State, states(v))
	}
	if n := g.chainCount(); n != 2 {
		t.Errorf("%d chains, want 2", n)
	}
	if n := len(g.srv.Pipelines("g/web")); n != 1 {
		t.Errorf("%d pipelines of web", n)
	}
	g.noRefusals()
}

// Why the pipelines depsd creates carry no status of their own: any
// status takes part in the pipeline's status, which is what depsd reads
// as the member's outcome (GitLab's Ci::Status::Composite, as the fake
// computes it). Only a success posted after the pipeline ended in
// success, failure or cancelation leaves it as it was.
func TestAStatusChangesThePipelinesOutcome(t *testing.T) {
	t.Parallel()
	g := newGitLabEnv(t, nil, "base>app")
	status := func(id int64) string {
		t.Helper()
		p, err := g.client.GetPipeline(g.ctx, g.srv.Pipelines("g/app")[0].ProjectID, id)
		if err != nil {
			t.Fatal(err)
		}
		return p.Status
	}
	post := func(id int64, state string) {
		t.Helper()
		for _, p := range g.srv.Pipelines("g/app") {
			if p.ID == id {
				if _, err := g.client.SetCommitStatus(g.ctx, p.ProjectID, p.SHA, gitlab.StatusOptions{State: state, Name: "depsd", PipelineID: id}); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
	}
	pipeline := func(own string) int64 {
		t.Helper()
		id, err := g.srv.AddPipeline("g/app", "main", "api", own)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	for _, tc := range []struct {
		name            string
		own, post, then string // the pipeline's own status, the status posted, the pipeline's jobs after
		want            string
	}{
		{"running keeps a finished pipeline running", "success", "running", "", "running"},
		{"success makes a skipped pipeline a success", "skipped", "success", "", "success"},
		{"failed outlives a retry that succeeds", "failed", "failed", "success", "failed"},
		{"success on a success", "success", "success", "", "success"},
		{"success on a failure", "failed", "success", "", "failed"},
		{"success on a failure retried", "failed", "success", "success", "success"},
		{"success on a cancelation", "canceled", "success", "", "canceled"},
	} {
		id := pipeline(tc.own)
		post(id, tc.post)
		if tc.then != "" {
			if err := g.srv.SetPipelineStatus(id, "running"); err != nil {
				t.Fatal(err)
			}
			if err := g.srv.SetPipelineStatus(id, tc.then); err != nil {
				t.Fatal(err)
			}
		}
		if got := status(id); got != tc.want {
			t.Errorf("%s: pipeline %s, want %s", tc.name, got, tc.want)
		}
	}
}

// An expired chain's status is canceled (nothing failed: it stopped),
// saying how much was left unfinished.
func TestChainStatusOfAnExpiredChain(t *testing.T) {
	t.Parallel()
	g := newStatusEnv(t, "base>app", "app>web")
	root := g.root("g/base")
	g.deliver()
	g.sendStatuses()
	g.send()
	g.finish("g/app", "success")
	g.clock.Advance(7*24*time.Hour + time.Minute)
	if _, err := g.engine.Reconcile(g.ctx); err != nil {
		t.Fatal(err)
	}
	if v := g.states(1); v.State != chain.Expired {
		t.Fatalf("chain %s: %s", v.State, states(v))
	}
	g.sendStatuses()
	if s := g.shown("g/base", root); s.Status != "canceled" || s.Description != "expired: 1 of 2 rebuilt, 1 unfinished" {
		t.Fatalf("status = %+v", s)
	}
	g.deliver()
	if n := g.chainCount(); n != 1 {
		t.Errorf("%d chains", n)
	}
	g.noRefusals()
}
