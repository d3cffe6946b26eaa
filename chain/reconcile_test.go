package chain_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab"
)

// readsGitLab counts the pipelines the reconciler reads, and runs during
// the first read what happens while that read waits in the client's
// limiter (behind pipeline creations) in a busy rebuild.
type readsGitLab struct {
	*fakeGitLab
	mu     sync.Mutex
	reads  map[int64]int
	during func()
}

func (g *readsGitLab) GetPipeline(ctx context.Context, projectID, pipelineID int64) (gitlab.Pipeline, error) {
	g.mu.Lock()
	g.reads[pipelineID]++
	during := g.during
	g.during = nil
	g.mu.Unlock()
	if during != nil {
		during()
	}
	return g.fakeGitLab.GetPipeline(ctx, projectID, pipelineID)
}

// A reconcile round whose reads are slow (they wait behind pipeline
// creations) does not read a pipeline whose webhook came meanwhile: one
// that ended is done with, one that started running is read by the next
// round if it is still running then. A missed end is still caught.
func TestReconcilerSkipsPipelinesWhoseWebhookCameDuringTheRound(t *testing.T) {
	t.Parallel()
	for _, status := range []string{"success", "running"} {
		t.Run(status, func(t *testing.T) {
			e := newEnv(t, chain.Full, "base>a", "base>b", "base>c")
			gl := &readsGitLab{fakeGitLab: e.gl, reads: map[int64]int{}}
			e.engine = e.newEngine(chain.Full, gl)
			id := e.rebuild("base")
			e.send()
			e.finish("base", "success")
			e.send()
			a, b, c := e.latest("a"), e.latest("b"), e.latest("c")
			// While the read of a waits, b's webhook arrives, and more
			// than the recheck interval passes. c's webhook is lost.
			gl.during = func() {
				e.finishPipeline("b", b, status)
				e.clock.Advance(2 * time.Second)
			}
			e.gl.setStatus(c.ID, "success")
			if _, err := e.engine.Reconcile(e.ctx); err != nil {
				t.Fatal(err)
			}
			if gl.reads[a.ID] != 1 || gl.reads[c.ID] != 1 {
				t.Errorf("reads of a %d, c %d; want 1 each", gl.reads[a.ID], gl.reads[c.ID])
			}
			if gl.reads[b.ID] != 0 {
				t.Errorf("b read %d times after its %s webhook came during the round", gl.reads[b.ID], status)
			}
			e.wantStates(id, "a=triggered b="+status+" base=success c=success")
			e.gl.setStatus(b.ID, "failed") // its end's webhook is lost
			if _, err := e.engine.Reconcile(e.ctx); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"success": "a=triggered b=success base=success c=success",
				"running": "a=triggered b=failed base=success c=success"}[status]
			e.wantStates(id, want)
		})
	}
}

// Webhooks recorded but not yet applied (the inbox works through a burst)
// are let through before the reconciler reads: it does not ask GitLab
// for a status that is already on its way.
func TestReconcilerLetsTheInboxApplyRecordedWebhooksFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a", "base>b")
	gl := &readsGitLab{fakeGitLab: e.gl, reads: map[int64]int{}}
	e.engine = e.newEngine(chain.Full, gl)
	id := e.rebuild("base")
	e.send()
	e.finish("base", "success")
	e.send()
	a, b := e.latest("a"), e.latest("b")
	// b's success webhook is recorded, not applied yet; a's is lost.
	e.gl.setStatus(a.ID, "success")
	e.gl.setStatus(b.ID, "success")
	ev := chain.PipelineEvent{ProjectID: b.ProjectID, Project: "b", PipelineID: b.ID, Status: "success",
		Ref: "main", Source: "api", Variables: b.vars, URL: b.WebURL, At: e.clock.Now()}
	if _, err := e.engine.RecordEvent(e.ctx, "b-success", chain.Event{Pipeline: &ev}); err != nil {
		t.Fatal(err)
	}
	waited := 0
	chain.SetInboxWaitHook(e.engine, func() {
		waited++
		if _, err := e.engine.ProcessInbox(e.ctx); err != nil {
			t.Error(err)
		}
	})
	if n, err := e.engine.Reconcile(e.ctx); n != 1 || err != nil {
		t.Fatalf("Reconcile = %d, %v; want 1 (a)", n, err)
	}
	if waited == 0 || gl.reads[b.ID] != 0 || gl.reads[a.ID] != 1 {
		t.Errorf("waited for the inbox %d times; reads of a %d, b %d; want a wait, a read once, b never",
			waited, gl.reads[a.ID], gl.reads[b.ID])
	}
	e.wantStates(id, "a=success b=success base=success")
}
