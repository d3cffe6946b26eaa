package chain_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
)

// priorityGitLab records the priority each GitLab call's context carries.
type priorityGitLab struct {
	*fakeGitLab
	mu   sync.Mutex
	seen map[string]map[gitlab.Priority]int // method → priority → calls
}

func (g *priorityGitLab) note(ctx context.Context, method string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen[method] == nil {
		g.seen[method] = map[gitlab.Priority]int{}
	}
	g.seen[method][gitlab.PriorityOf(ctx)]++
}

func (g *priorityGitLab) CreatePipeline(ctx context.Context, projectID int64, ref string, vars gitlab.CreateOptions) (gitlab.Pipeline, error) {
	g.note(ctx, "create")
	return g.fakeGitLab.CreatePipeline(ctx, projectID, ref, vars)
}

func (g *priorityGitLab) GetPipeline(ctx context.Context, projectID, pipelineID int64) (gitlab.Pipeline, error) {
	g.note(ctx, "get")
	return g.fakeGitLab.GetPipeline(ctx, projectID, pipelineID)
}

func (g *priorityGitLab) ListPipelines(ctx context.Context, projectID int64, f gitlab.PipelineFilter) ([]gitlab.Pipeline, error) {
	g.note(ctx, "list")
	return g.fakeGitLab.ListPipelines(ctx, projectID, f)
}

func (g *priorityGitLab) PipelineVariables(ctx context.Context, projectID, pipelineID int64) (map[string]string, error) {
	g.note(ctx, "variables")
	return g.fakeGitLab.PipelineVariables(ctx, projectID, pipelineID)
}

// The requests that move a chain forward — the creation and the look-up
// for an earlier attempt's pipeline before a resend — are urgent, so that
// they pass the client's limits ahead of the reconciler's and the
// catch-up's reads, which stay normal.
func TestOutboxRequestsAreUrgentBackgroundReadsNormal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a")
	gl := &priorityGitLab{fakeGitLab: e.gl, seen: map[string]map[gitlab.Priority]int{}}
	e.engine = e.newEngine(chain.Full, gl)
	first := true
	e.gl.createErr = func(int64) (error, bool) {
		if first {
			first = false
			return errBoom, true // 5xx, but GitLab made the pipeline
		}
		return nil, false
	}
	e.rebuild("base")
	e.send()
	e.clock.Advance(time.Minute)
	e.send() // looks for the pipeline and adopts it
	want := map[string]map[gitlab.Priority]int{
		"create":    {gitlab.PriorityUrgent: 1},
		"list":      {gitlab.PriorityUrgent: 1},
		"variables": {gitlab.PriorityUrgent: 1},
	}
	check := func(when string) {
		t.Helper()
		gl.mu.Lock()
		defer gl.mu.Unlock()
		for method, byPrio := range want {
			for p, n := range byPrio {
				if gl.seen[method][p] != n {
					t.Errorf("%s: %s calls with priority %s: %d, want %d (all: %v)", when, method, p, gl.seen[method][p], n, gl.seen)
				}
			}
		}
	}
	check("outbox")
	if _, err := e.engine.Reconcile(e.ctx); err != nil {
		t.Fatal(err)
	}
	want["get"] = map[gitlab.Priority]int{gitlab.PriorityNormal: 1}
	check("reconcile")
	if _, err := e.engine.CatchUp(e.ctx); err != nil {
		t.Fatal(err)
	}
	want["list"][gitlab.PriorityNormal] = 1 // base has something downstream, a not
	check("catch-up")
}

// holdingGitLab records the hold the outbox puts on the client's
// background requests (gitlab.Client.HoldNormal), and whether it was on
// at each create.
type holdingGitLab struct {
	*fakeGitLab
	mu             sync.Mutex
	held           bool
	heldAtCreate   []bool
	holds, unholds int
}

func (g *holdingGitLab) HoldNormal(held bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if held == g.held {
		panic("HoldNormal called twice with the same value")
	}
	g.held = held
	if held {
		g.holds++
	} else {
		g.unholds++
	}
}

func (g *holdingGitLab) CreatePipeline(ctx context.Context, projectID int64, ref string, o gitlab.CreateOptions) (gitlab.Pipeline, error) {
	g.mu.Lock()
	g.heldAtCreate = append(g.heldAtCreate, g.held)
	g.mu.Unlock()
	return g.fakeGitLab.CreatePipeline(ctx, projectID, ref, o)
}

func (g *holdingGitLab) state() (held bool, atCreate []bool, holds, unholds int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held, slices.Clone(g.heldAtCreate), g.holds, g.unholds
}

// While creates are due the outbox holds the client's background requests
// (scans, the reconciler, the catch-up), from the event that makes them
// due until GitLab answered the last of them, so that no background read
// takes a token the creates are due to use; once nothing is due it lets
// them go again.
func TestOutboxHoldsBackgroundRequestsWhileCreatesAreDue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a", "base>b")
	gl := &holdingGitLab{fakeGitLab: e.gl}
	obs := &signalObserver{created: make(chan string, 4)}
	en, err := chain.New(chain.Config{Store: e.store, GitLab: gl, Graph: e.store.Graph, Now: e.clock.Now, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	e.engine = en
	stop := runWorkers(t, e.ctx, e.engine.RunInbox, e.engine.RunOutbox)
	defer stop() // if the test ends early
	released := func(when string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if held, _, _, _ := gl.state(); !held {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: background requests still held with nothing due", when)
			}
		}
	}
	e.rebuild("base")
	<-obs.created
	released("after base's create")
	p := e.latest("base")
	ev := chain.PipelineEvent{ProjectID: p.ProjectID, Project: "base", PipelineID: p.ID, Status: "success",
		Ref: "main", Source: "api", Variables: p.vars}
	e.gl.setStatus(p.ID, "success")
	if _, err := e.engine.RecordEvent(e.ctx, "run-1", chain.Event{Pipeline: &ev}); err != nil {
		t.Fatal(err)
	}
	<-obs.created
	<-obs.created
	released("after a's and b's creates")
	stop()
	_, atCreate, holds, unholds := gl.state()
	if !slices.Equal(atCreate, []bool{true, true, true}) {
		t.Errorf("held at each create: %v, want held at all three", atCreate)
	}
	if holds == 0 || holds != unholds {
		t.Errorf("%d holds, %d releases", holds, unholds)
	}
}

// A rebuild holds the client's background requests from the call on: the
// transaction deciding a chain of thousands of members takes a second or
// more, and the project's create is due all along.
func TestRebuildHoldsBackgroundRequestsWhileItDecides(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a")
	gl := &holdingGitLab{fakeGitLab: e.gl}
	var heldInGraph []bool
	graph := func(ctx context.Context) (*deps.Graph, error) {
		held, _, _, _ := gl.state()
		heldInGraph = append(heldInGraph, held)
		return e.store.Graph(ctx)
	}
	en, err := chain.New(chain.Config{Store: e.store, GitLab: gl, Graph: graph, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := en.Rebuild(e.ctx, "base", chain.Reason{Kind: chain.ReasonRebuild}); err != nil {
		t.Fatal(err)
	}
	if held, _, _, _ := gl.state(); held || len(heldInGraph) == 0 || !heldInGraph[0] {
		t.Errorf("held while the rebuild loaded the graph: %v; held after it: %v", heldInGraph, held)
	}
}
