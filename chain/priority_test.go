package chain_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
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
