package chain_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/store/storetest"
)

// clock is a settable time source: tests never sleep.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fakeGitLab is an in-memory chain.GitLab. Pipelines are created in status
// "created"; tests end them with events.
type fakeGitLab struct {
	mu        sync.Mutex
	now       func() time.Time
	nextID    int64
	pipelines []fakePipeline
	// createErr, if set, is called before each create; a non-nil error is
	// returned. If created is true the pipeline is created anyway (a 5xx
	// or timeout after GitLab did the work).
	createErr func(projectID int64) (err error, created bool)
	creates   int // CreatePipeline calls
}

type fakePipeline struct {
	gitlab.Pipeline
	vars map[string]string
}

func (f *fakeGitLab) CurrentUser(context.Context) (gitlab.User, error) {
	return gitlab.User{ID: 1, Username: "depsd"}, nil
}

func (f *fakeGitLab) CreatePipeline(_ context.Context, projectID int64, ref string, o gitlab.CreateOptions) (gitlab.Pipeline, error) {
	vars := o.Variables
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates++
	var err error
	created := true
	if f.createErr != nil {
		var c bool
		if err, c = f.createErr(projectID); err != nil {
			created = c
		}
	}
	if !created {
		return gitlab.Pipeline{}, err
	}
	f.nextID++
	p := gitlab.Pipeline{ID: 1000 + f.nextID, ProjectID: projectID, Ref: ref, Status: "created", Source: "api",
		WebURL:    fmt.Sprintf("https://gitlab.example.com/p/%d/-/pipelines/%d", projectID, 1000+f.nextID),
		CreatedAt: f.now(), UpdatedAt: f.now()}
	f.pipelines = append(f.pipelines, fakePipeline{p, vars})
	if err != nil {
		return gitlab.Pipeline{}, err
	}
	return p, nil
}

func (f *fakeGitLab) GetPipeline(_ context.Context, projectID, pipelineID int64) (gitlab.Pipeline, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.pipelines {
		if p.ID == pipelineID && p.ProjectID == projectID {
			return p.Pipeline, nil
		}
	}
	return gitlab.Pipeline{}, gitlab.ErrNotFound
}

func (f *fakeGitLab) ListPipelines(_ context.Context, projectID int64, fl gitlab.PipelineFilter) ([]gitlab.Pipeline, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []gitlab.Pipeline
	for i := len(f.pipelines) - 1; i >= 0; i-- {
		p := f.pipelines[i]
		if p.ProjectID == projectID && (fl.Ref == "" || p.Ref == fl.Ref) && p.UpdatedAt.After(fl.UpdatedAfter) {
			out = append(out, p.Pipeline)
		}
	}
	return out, nil
}

func (f *fakeGitLab) PipelineVariables(_ context.Context, projectID, pipelineID int64) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.pipelines {
		if p.ID == pipelineID {
			return p.vars, nil
		}
	}
	return nil, gitlab.ErrNotFound
}

// setStatus changes a pipeline's status as GitLab would (no event is sent).
func (f *fakeGitLab) setStatus(id int64, status string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.pipelines {
		if f.pipelines[i].ID == id {
			f.pipelines[i].Status = status
			f.pipelines[i].UpdatedAt = f.now()
		}
	}
}

// created returns the pipelines created for a project, oldest first.
func (f *fakeGitLab) created(projectID int64) []fakePipeline {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakePipeline
	for _, p := range f.pipelines {
		if p.ProjectID == projectID {
			out = append(out, p)
		}
	}
	return out
}

// env is one test world: a store file, a graph of projects, a fake GitLab
// and an engine.
type env struct {
	t      *testing.T
	ctx    context.Context
	store  *store.Store
	path   string
	clock  *clock
	gl     *fakeGitLab
	engine *chain.Engine
	ids    map[string]int64
	keys   int
}

var t0 = time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)

// edges: "up>down" pairs; lone projects as "p".
func newEnv(t *testing.T, mode chain.Mode, edges ...string) *env {
	t.Helper()
	path := storetest.State(t)
	s, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// What the engine did must be what the store holds: the store's cache
	// of the active chains, which the engine changes in place, may not
	// differ from the store (checked once more when the test ends).
	t.Cleanup(func() {
		if err := s.CheckChainCache(context.Background()); err != nil {
			t.Errorf("chain cache: %v", err)
		}
	})
	e := &env{t: t, ctx: t.Context(), store: s, path: path, clock: &clock{t: t0}, ids: map[string]int64{}}
	e.gl = &fakeGitLab{now: e.clock.Now}
	ups := map[string][]string{}
	var names []string
	for _, ed := range edges {
		up, down, ok := strings.Cut(ed, ">")
		for _, p := range []string{up, down} {
			if p != "" && !slices.Contains(names, p) {
				names = append(names, p)
			}
		}
		if ok {
			ups[down] = append(ups[down], up)
		}
	}
	sort.Strings(names)
	var projects []scan.Project
	for i, n := range names {
		p := scan.Project{ID: int64(i + 1), Path: n, DefaultBranch: "main"}
		for _, u := range ups[n] {
			p.Dependencies = append(p.Dependencies, deps.Dependency{Kind: deps.KindGitLabDeps, Ref: u, Project: u})
		}
		e.ids[n] = p.ID
		projects = append(projects, p)
	}
	if err := s.ApplyScan(e.ctx, projects, scan.Meta{StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	e.engine = e.newEngine(mode, e.gl)
	return e
}

func (e *env) newEngine(mode chain.Mode, gl chain.GitLab) *chain.Engine {
	e.t.Helper()
	en, err := chain.New(chain.Config{Store: e.store, GitLab: gl, Graph: e.store.Graph, Mode: mode, Now: e.clock.Now})
	if err != nil {
		e.t.Fatal(err)
	}
	return en
}

func (e *env) rebuild(p string) int64 {
	e.t.Helper()
	id, err := e.engine.Rebuild(e.ctx, p, chain.Reason{Kind: chain.ReasonRebuild, Detail: "test"})
	if err != nil {
		e.t.Fatalf("Rebuild(%s): %v", p, err)
	}
	return id
}

// send runs the outbox worker once and returns how many it sent.
func (e *env) send() int {
	e.t.Helper()
	n, err := e.engine.SendPending(e.ctx)
	if err != nil {
		e.t.Fatalf("SendPending: %v", err)
	}
	return n
}

// deliver records ev as a webhook delivery and processes the inbox.
func (e *env) deliver(ev chain.PipelineEvent) {
	e.t.Helper()
	e.keys++
	if _, err := e.engine.RecordEvent(e.ctx, fmt.Sprintf("key-%d", e.keys), chain.Event{Pipeline: &ev}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.engine.ProcessInbox(e.ctx); err != nil {
		e.t.Fatal(err)
	}
}

// latest returns the newest pipeline created for project.
func (e *env) latest(project string) fakePipeline {
	e.t.Helper()
	ps := e.gl.created(e.ids[project])
	if len(ps) == 0 {
		e.t.Fatalf("no pipeline created for %s", project)
	}
	return ps[len(ps)-1]
}

// finish ends project's newest depsd pipeline with status, by webhook.
func (e *env) finish(project, status string) {
	e.t.Helper()
	e.finishPipeline(project, e.latest(project), status)
}

// finishPipeline ends one of project's depsd pipelines with status, by webhook.
func (e *env) finishPipeline(project string, p fakePipeline, status string) {
	e.t.Helper()
	e.gl.setStatus(p.ID, status)
	e.deliver(chain.PipelineEvent{ProjectID: p.ProjectID, Project: project, PipelineID: p.ID, Status: status,
		Ref: "main", Source: "api", Variables: p.vars, URL: p.WebURL, At: e.clock.Now()})
}

// external reports a pipeline depsd did not create.
func (e *env) external(project string, pipelineID int64, status string) {
	e.t.Helper()
	e.deliver(chain.PipelineEvent{ProjectID: e.ids[project], Project: project, PipelineID: pipelineID, Status: status,
		Ref: "main", Source: "push", At: e.clock.Now()})
}

// count is how many pipelines depsd created for project.
func (e *env) count(project string) int { return len(e.gl.created(e.ids[project])) }

func (e *env) chain(id int64) chain.ChainView {
	e.t.Helper()
	v, err := e.engine.Chain(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

// states returns "project=state" for every member, plus "+requeued".
func states(v chain.ChainView) string {
	var parts []string
	for _, m := range v.Members {
		s := m.Project + "=" + string(m.State)
		if m.Requeued {
			s += "+requeued"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func (e *env) wantStates(id int64, want string) chain.ChainView {
	e.t.Helper()
	v := e.chain(id)
	if got := states(v); got != want {
		e.t.Fatalf("chain %d members:\n got %s\nwant %s", id, got, want)
	}
	return v
}

func (e *env) wantCounts(want map[string]int) {
	e.t.Helper()
	for p, n := range want {
		if got := e.count(p); got != n {
			e.t.Errorf("pipelines created for %s = %d, want %d", p, got, n)
		}
	}
}

func member(v chain.ChainView, p string) chain.MemberView {
	for _, m := range v.Members {
		if m.Project == p {
			return m
		}
	}
	return chain.MemberView{}
}

var errBoom = errors.New("connection reset by peer")

// runWorkers runs each worker (an engine's RunInbox, RunOutbox, ...) in a
// goroutine of its own until stop, which cancels them and fails the test
// if one ends with an error or has not ended within 10 s. stop may be
// called more than once (a deferred stop after an explicit one).
func runWorkers(t *testing.T, ctx context.Context, workers ...func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	stopped := make(chan error, len(workers))
	for _, w := range workers {
		go func() { stopped <- w(ctx) }()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			timeout := time.After(10 * time.Second)
			for range workers {
				select {
				case err := <-stopped:
					if err != nil {
						t.Errorf("worker ended with %v", err)
					}
				case <-timeout:
					t.Error("a worker did not stop within 10 s")
					return
				}
			}
		})
	}
}
